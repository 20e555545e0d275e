"""Splice: parts joined by an equal-power crossfade, with no gap, the same however they are chunked."""

from __future__ import annotations

import numpy as np
import pytest

from app.audio.splice import Splice, equal_power, splice, width_samples


def spliced_stream(parts: list[np.ndarray], width: int, sizes: list[int]) -> np.ndarray:
    """``parts`` pushed through ``Splice`` in chunks of ``sizes`` (cycled), joined, flushed."""
    stage, out, k = Splice(width), [], 0
    for index, part in enumerate(parts):
        if index:
            out.append(stage.join())
        i = 0
        while i < len(part):
            n = sizes[k % len(sizes)]
            out.append(stage.push(part[i : i + n]))
            i, k = i + n, k + 1
    out.append(stage.flush())
    return np.concatenate(out)


def noise(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def test_a_join_is_an_equal_power_crossfade_over_the_width() -> None:
    a, b = np.ones(1000, dtype=np.float32), np.full(800, 2.0, dtype=np.float32)
    out = splice([a, b], 100)
    assert len(out) == 1000 + 800 - 100  # no gap, one crossfade of overlap
    np.testing.assert_array_equal(out[:900], a[:900])
    np.testing.assert_array_equal(out[1000:], b[100:])
    fade_out, fade_in = equal_power(100)
    np.testing.assert_allclose(out[900:1000], fade_out + 2 * fade_in, rtol=1e-6)
    np.testing.assert_allclose(fade_out**2 + fade_in**2, 1.0, rtol=1e-6)  # equal power
    assert np.all(np.diff(fade_in) > 0) and fade_in[0] > 0 and fade_out[-1] > 0


@pytest.mark.parametrize("sizes", [[1], [7], [99, 3], [100], [5000]])
def test_streaming_equals_the_whole_join_however_chunked(sizes: list[int]) -> None:
    parts = [noise(1200, 1), noise(480, 2), noise(30, 3), noise(2000, 4), noise(0, 5), noise(700, 6)]
    whole = splice(parts, 240)
    np.testing.assert_array_equal(spliced_stream(parts, 240, sizes), whole)
    rnd = list(np.random.default_rng(7).integers(0, 300, 400))  # empty chunks too
    np.testing.assert_array_equal(spliced_stream(parts, 240, rnd), whole)


def test_length_is_the_parts_less_one_crossfade_per_join() -> None:
    parts = [noise(n, n) for n in (1000, 2000, 1500, 3000)]
    assert len(spliced_stream(parts, 480, [256])) == 7500 - 3 * 480


def test_a_part_shorter_than_the_crossfade_blends_over_what_it_has() -> None:
    a, short, c = noise(1000, 1), noise(50, 2), noise(1000, 3)
    out = spliced_stream([a, short, c], 200, [64])
    assert len(out) == 1000 + 50 + 1000 - 50 - 200
    np.testing.assert_array_equal(out, splice([a, short, c], 200))
    fade_out, fade_in = equal_power(50)  # the first join: over the short part's 50 samples
    np.testing.assert_allclose(splice([a, short], 200)[950:], a[950:] * fade_out + short * fade_in, rtol=1e-6)


def test_width_zero_butts_the_parts_and_one_part_passes_unchanged() -> None:
    a, b = noise(500, 1), noise(300, 2)
    np.testing.assert_array_equal(spliced_stream([a, b], 0, [77]), np.concatenate([a, b]))
    np.testing.assert_array_equal(spliced_stream([a], 480, [77]), a)
    assert width_samples(20.0) == 480
    with pytest.raises(ValueError, match="crossfade width"):
        Splice(-1)
