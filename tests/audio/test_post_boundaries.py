"""Boundaries in the post chain: breaks are exact digital silence after the speed change, the segments
around them are stretched whole, and the loudness stage scales the speech as if no break were there."""

from __future__ import annotations

import numpy as np
import pytest

from app.audio.post import Boundary, PostChain, PostOptions

RATE = 24_000


def noise(seconds: float, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(round(seconds * RATE)) * 0.1).astype(np.float32)


def run(items: list[np.ndarray | Boundary], chunk: int = 0, **options: object) -> np.ndarray:
    chain = PostChain(PostOptions(response_format="pcm", stream=True, **options))  # type: ignore[arg-type]
    data = b""
    for item in items:
        if isinstance(item, Boundary) or not chunk:
            data += chain.push(item)
            continue
        for start in range(0, item.size, chunk):
            data += chain.push(item[start : start + chunk])
    data += chain.flush()
    return np.frombuffer(data, dtype="<i2")


def zero_runs(pcm: np.ndarray, shortest: int = 48) -> list[tuple[int, int]]:
    """(start, length) of each run of exact zeros at least ``shortest`` samples long."""
    zero = np.concatenate(([False], pcm == 0, [False]))
    edges = np.flatnonzero(np.diff(zero.astype(np.int8)))
    return [(int(a), int(b - a)) for a, b in zip(edges[::2], edges[1::2], strict=True) if b - a >= shortest]


@pytest.mark.parametrize("speed", [1.0, 1.5, 0.75])
@pytest.mark.parametrize("chunk", [0, 1000])
def test_a_break_is_exact_silence_where_the_first_segment_ends_at_any_speed(speed: float, chunk: int) -> None:
    first, second = noise(1.3, 1), noise(0.9, 2)
    out = run([first, Boundary(silence=round(0.7 * RATE)), second], chunk, speaking_rate=speed)
    head = round(first.size / speed)
    assert out.size == head + round(0.7 * RATE) + round(second.size / speed)
    assert zero_runs(out) == [(head, round(0.7 * RATE))]


def test_loudness_gain_is_the_same_with_and_without_the_break() -> None:
    first, second = noise(1.3, 3) * 0.2, noise(0.9, 4) * 0.2
    plain = run([first, second], 777)
    broken = run([first, Boundary(silence=4800), second], 777)
    assert np.array_equal(broken[: first.size], plain[: first.size])
    assert np.array_equal(broken[first.size + 4800 :], plain[first.size :])


def test_a_rate_boundary_stretches_the_next_segment_at_its_own_rate() -> None:
    first, second, third = noise(0.8, 5), noise(1.2, 6), noise(0.6, 7)
    items = [first, Boundary(rate=1.5), second, Boundary(silence=2400, rate=1.0), third]
    out = run(items, 500, speaking_rate=1.2, normalize=False)
    speeds = (1.2, 1.8, 1.2)
    lengths = [round(x.size / s) for x, s in zip((first, second, third), speeds, strict=True)]
    assert out.size == sum(lengths) + 2400
    assert zero_runs(out) == [(lengths[0] + lengths[1], 2400)]


def test_a_leading_and_a_trailing_break() -> None:
    speech = noise(0.5, 8)
    out = run([Boundary(silence=1200), speech, Boundary(silence=2400)], 333, speaking_rate=1.5)
    body = round(speech.size / 1.5)
    assert out.size == 1200 + body + 2400
    (lead_start, lead), trail = zero_runs(out)
    assert lead_start == 0 and 1200 <= lead <= 1200 + 24  # the fade-in's first samples round to 0
    assert trail == (1200 + body, 2400)


@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_lossless_formats_keep_the_silence_exact(fmt: str) -> None:
    import io

    import soundfile as sf

    chain = PostChain(PostOptions(response_format=fmt, stream=False))
    speech = noise(0.6, 9)
    data = chain.push(speech) + chain.push(Boundary(silence=16800)) + chain.push(speech) + chain.flush()
    pcm, rate = sf.read(io.BytesIO(data), dtype="int16")
    assert rate == RATE
    assert zero_runs(pcm) == [(speech.size, 16800)]
