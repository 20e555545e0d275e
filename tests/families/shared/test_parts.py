"""play_parts: parts in order as one spliced stream, the next generated ahead (one at most), stopped on
close, errors where they belong, stats summed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable

import numpy as np
import pytest

from app.audio.splice import splice
from app.core.stats import UtteranceStats
from app.families.shared.parts import Part, play_parts

WIDTH = 48
CHUNK = 100


def audio(index: int, size: int) -> np.ndarray:
    """Part ``index``'s known audio: noise seeded by the index."""
    return np.random.default_rng(index).standard_normal(size).astype(np.float32)


class FakeParts:
    """Parts that 'generate' half their audio, say so, then 'decode' the rest after a pause; they log
    what happens, in order."""

    def __init__(
        self,
        sizes: list[int],
        fail: int | None = None,
        silent: frozenset[int] = frozenset(),
        cut: frozenset[int] = frozenset(),
    ) -> None:
        self.sizes = sizes
        self.fail = fail  # this part raises after its first chunk
        self.silent = silent  # these parts never call generated()
        self.cut = cut  # these parts finish with "length"
        self.log: list[str] = []
        self.due: dict[int, tuple[float | None, float]] = {}  # part -> (its due, time.monotonic()) at start

    async def stream(self, part: Part) -> AsyncGenerator[np.ndarray, None]:
        k = part.index
        self.log.append(f"start {k}")
        self.due[k] = (part.due(), time.monotonic())
        pcm = audio(k, self.sizes[k])
        chunks = [pcm[i : i + CHUNK] for i in range(0, len(pcm), CHUNK)]
        half = len(chunks) // 2
        try:
            for i, chunk in enumerate(chunks):
                if i == half:
                    part.stats.codes, part.stats.tokens = 10 + k, [k] * (10 + k)
                    part.stats.prompt_tokens = 100 + k
                    part.stats.stall_s = 0.25 * k  # its listener's stalls, as its stitcher counts them
                    part.stats.finish_reason = "length" if k in self.cut else "stop"
                    if k not in self.silent:
                        part.generated()
                        self.log.append(f"generated {k}")
                    await asyncio.sleep(0.01)  # the last windows are being decoded
                if k == self.fail and i == 1:
                    raise RuntimeError(f"part {k} failed")
                await asyncio.sleep(0)
                part.stats.samples += chunk.size  # as a family's stream counts what it yields
                yield chunk
        finally:
            self.log.append(f"end {k}")

    async def done(self, part: Part, last: bool) -> None:
        self.log.append(f"done {part.index}{' last' if last else ''}")


async def collect(chunks: AsyncGenerator[np.ndarray, None]) -> np.ndarray:
    """All chunks, read as a client does: the event loop runs between two chunks (sending one)."""
    out = []
    async for chunk in chunks:
        out.append(chunk)
        await asyncio.sleep(0)
    return np.concatenate(out)


async def test_parts_come_out_in_order_as_one_spliced_stream() -> None:
    sizes = [1000, 730, 40, 1500, 900]
    fake, stats = FakeParts(sizes), UtteranceStats()
    out = await collect(play_parts(len(sizes), fake.stream, stats, WIDTH, fake.done))
    expected = splice([audio(k, n) for k, n in enumerate(sizes)], WIDTH)
    np.testing.assert_array_equal(out, expected)
    # no gap and nothing lost: every part's samples less one crossfade per join (the short part's is 40)
    assert len(out) == sum(sizes) - 3 * WIDTH - 40 == stats.samples
    assert [e for e in fake.log if e.startswith("done")] == [
        "done 0",
        "done 1",
        "done 2",
        "done 3",
        "done 4 last",
    ]


async def test_the_next_part_starts_when_this_one_is_generated_and_only_one_runs_ahead() -> None:
    fake = FakeParts([1200] * 5)
    await collect(play_parts(5, fake.stream, UtteranceStats(), WIDTH, fake.done))
    at = fake.log.index
    for k in range(1, 5):
        # generating while the part before plays: started before that part's audio was all taken
        assert at(f"generated {k - 1}") < at(f"start {k}") < at(f"done {k - 1}")
        if k >= 2:
            assert at(f"done {k - 2}") < at(f"start {k}")  # never two parts ahead


async def test_a_part_that_never_says_it_is_generated_starts_its_successor_when_it_ends() -> None:
    sizes = [800, 800, 800]
    fake = FakeParts(sizes, silent=frozenset({1}))
    out = await collect(play_parts(3, fake.stream, UtteranceStats(), WIDTH, fake.done))
    np.testing.assert_array_equal(out, splice([audio(k, 800) for k in range(3)], WIDTH))
    assert fake.log.index("start 2") > fake.log.index("end 1")


@pytest.mark.parametrize("taken", [7, 14], ids=["during-part-0", "during-part-1"])
async def test_closing_stops_the_running_parts_and_starts_no_more(taken: int) -> None:
    fake = FakeParts([1000] * 6)
    chunks = play_parts(6, fake.stream, UtteranceStats(), WIDTH, fake.done)
    for _ in range(taken):
        await anext(chunks)
    await asyncio.sleep(0.05)  # the part ahead (if any) is generating
    await chunks.aclose()
    started = [e for e in fake.log if e.startswith("start")]
    ended = [e for e in fake.log if e.startswith("end")]
    assert len(started) == len(ended) == (2 if taken == 7 else 3)  # the one playing and the one ahead
    await asyncio.sleep(0.05)
    assert len([e for e in fake.log if e.startswith("start")]) == len(started)  # and nothing later


async def test_a_part_ahead_that_fails_fails_the_stream_where_its_audio_would_play() -> None:
    sizes = [1000, 1000, 1000, 1000]
    fake = FakeParts(sizes, fail=2)
    chunks = play_parts(4, fake.stream, UtteranceStats(), WIDTH, fake.done)
    got: list[np.ndarray] = []
    with pytest.raises(RuntimeError, match="part 2 failed"):
        async for chunk in chunks:
            got.append(chunk)
    played = np.concatenate(got)
    whole = splice([audio(0, 1000), audio(1, 1000), audio(2, 1000)[:CHUNK]], WIDTH)
    np.testing.assert_array_equal(played, whole[: len(played)])
    assert len(played) >= 2000 - WIDTH  # all of parts 0 and 1 (less the crossfade held for the join)
    assert "start 3" not in fake.log


async def test_the_request_stats_are_the_sum_of_the_parts() -> None:
    fake, stats = FakeParts([600, 600, 600], cut=frozenset({1})), UtteranceStats()
    await collect(play_parts(3, fake.stream, stats, WIDTH, fake.done))
    assert stats.codes == 10 + 11 + 12
    assert stats.tokens == [0] * 10 + [1] * 11 + [2] * 12
    assert stats.prompt_tokens == 100 + 101 + 102
    assert stats.stall_s == pytest.approx(0.25 + 0.5)  # the listener stood without audio in parts 1 and 2
    assert stats.finish_reason == "length"  # a part was cut, though the last one stopped
    assert stats.samples == 1800 - 2 * WIDTH and stats.generation_s > 0


async def test_a_part_read_ahead_is_due_when_a_listener_reaches_it() -> None:
    """Its due time (the start of its decodes' play-out deadlines, and its lead) is the first audio's time
    plus the audio before it, not now: the codec serves streams that need audio now first."""
    fake = FakeParts([48_000, 24_000, 24_000])  # 2 s, then 1 s parts
    started = time.monotonic()
    await collect(play_parts(3, fake.stream, UtteranceStats(), WIDTH, fake.done))
    assert fake.due[0][0] is None  # nothing played yet: no listener to reach it
    due, now = fake.due[1]
    assert due is not None
    assert due - now > 0.9  # started once part 0 had produced 1 s of its 2 s, which had just begun playing
    assert started < due <= started + 2.0 + 0.5


class Arriving:
    """A growing source: part k exists ``gaps[k]`` seconds after part k - 1 (a streamed turn's text),
    then the input ends."""

    def __init__(self, gaps: list[float]) -> None:
        self.gaps = gaps
        self.count = 0
        self.listeners: list[Callable[[], None]] = []
        self.task = asyncio.create_task(self.arrive())

    async def arrive(self) -> None:
        for gap in self.gaps:
            await asyncio.sleep(gap)
            self.count += 1
            for added in self.listeners:
                added()

    def known(self) -> int:
        return self.count

    async def wait(self, index: int) -> bool:
        while index >= self.count and not self.task.done():
            await asyncio.sleep(0.005)
        return index < self.count

    def listen(self, added: Callable[[], None]) -> None:
        self.listeners.append(added)


async def test_the_time_spent_waiting_for_a_growing_sources_parts_is_parked() -> None:
    """It is the text's time, not the LM's: the LM's measured pace leaves it out."""
    fake, stats = FakeParts([600, 600]), UtteranceStats()
    await collect(play_parts(Arriving([0.1, 0.3]), fake.stream, stats, WIDTH, fake.done))
    assert fake.log.count("done 1 last") == 1
    assert 0.35 <= stats.parked_s <= stats.generation_s  # 0.1 for the first part, then about 0.3


async def test_a_growing_sources_part_is_not_due_before_it_exists() -> None:
    """A listener who ran dry waiting for the text (the client's) was not kept waiting by this stream: the
    late part is due when it came to exist, so its decodes are not late from the start, and the wait is
    parked time, not a stall."""
    fake = FakeParts([600, 600])  # 25 ms each: part 0 has long been played when part 1 exists
    await collect(play_parts(Arriving([0.0, 0.4]), fake.stream, UtteranceStats(), WIDTH, fake.done))
    due, started = fake.due[1]
    assert due is not None
    assert started - 0.05 <= due <= started  # when its text came, just before it started


async def test_a_stall_in_one_part_is_not_charged_again_to_the_next() -> None:
    """The listener stood dry for 0.3 s in part 0, so it reaches part 1 0.3 s later than part 0's audio
    alone would say: part 1 is due then, not late from its start."""
    dues: list[float | None] = []

    async def stream(part: Part) -> AsyncGenerator[np.ndarray, None]:
        if part.index:
            dues.append(part.due())
            yield audio(1, 2400)
            return
        yield audio(0, 2400)  # 0.1 s
        await asyncio.sleep(0.4)  # its listener runs dry for 0.3 s
        part.generated()
        yield audio(0, 2400)

    chunks, heard = play_parts(2, stream, UtteranceStats(), WIDTH), []
    async for _ in chunks:
        heard.append(time.monotonic())
    (due,) = dues
    assert due is not None
    assert due - heard[0] == pytest.approx(0.5 - WIDTH / 24_000, abs=0.05)  # 0.2 s of audio + 0.3 s dry
