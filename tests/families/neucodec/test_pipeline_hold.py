"""synthesize's first-audio hold (an interleave turn's fallback check): the first audio goes out the
moment the LM has sent ``hold_codes`` codes or ended, not when the window after it is decoded, or when a
listener already playing gets to it; for an LM near real time not before the stitcher's ``release_at``;
the audio is the same as without a hold."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import numpy as np

from app.audio.stitcher import DeadlineCuts, StitchSchedule
from app.core.stats import UtteranceStats
from app.core.types import FinishReason
from app.families.neucodec.lm.types import GenerationParams
from app.families.neucodec.pipeline import HOLD_MARGIN_S, synthesize
from tests.families.neucodec.test_pipeline_cuts import Codec, PacedStream, Source

SPT = 480
PARAMS = GenerationParams(prompt="p", model="m", max_tokens=1000, temperature=0.0, repetition_penalty=1.0)
SCHEDULE = StitchSchedule(10, 6.0, 500, 2, 3, 0)  # the first window decodes at 12 codes, the second at 82


class FedStream:
    """Codes as the test feeds them (``feed``), the end with ``end``."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[list[int] | None] = asyncio.Queue()
        self.finish_reason: FinishReason | None = None
        self.prompt_tokens: int | None = None
        self.sent = 0

    def feed(self, count: int) -> None:
        self.queue.put_nowait(list(range(self.sent + 1, self.sent + count + 1)))
        self.sent += count

    def end(self) -> None:
        self.queue.put_nowait(None)

    async def _deltas(self) -> AsyncIterator[list[int]]:
        while (codes := await self.queue.get()) is not None:
            yield codes
        self.finish_reason = "stop"

    def __aiter__(self) -> AsyncIterator[list[int]]:
        return self._deltas()

    async def aclose(self) -> None:
        return None


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(5):
        while not condition():
            await asyncio.sleep(0.005)


async def settle() -> None:
    await asyncio.sleep(0.05)


class Run:
    """synthesize over a fed stream, its chunks collected by a task as they come."""

    def __init__(self, hold_codes: int, due: float | None = None) -> None:
        self.stream, self.codec, self.stats = FedStream(), Codec(), UtteranceStats()
        self.chunks: list[np.ndarray] = []
        self.out_at: list[float] = []  # time.monotonic() of each chunk
        self.task = asyncio.ensure_future(self._collect(hold_codes, due))

    async def _collect(self, hold_codes: int, due: float | None) -> None:
        source = Source(self.stream)
        reaches = None if due is None else lambda: due
        chunks = synthesize(
            source, self.codec.decode, PARAMS, SCHEDULE, self.stats, due=reaches, hold_codes=hold_codes
        )
        async for chunk in chunks:
            self.chunks.append(chunk)
            self.out_at.append(time.monotonic())

    @property
    def samples(self) -> int:
        return sum(chunk.size for chunk in self.chunks)


def expected(codes: int) -> np.ndarray:
    return np.repeat(np.arange(1, codes + 1, dtype=np.float32) / 1000, SPT)


async def test_the_first_audio_goes_out_when_the_lm_reaches_the_hold_not_at_the_next_window() -> None:
    run = Run(hold_codes=25)
    run.stream.feed(12)
    await until(lambda: run.codec.calls == [12])
    await settle()
    assert run.chunks == [], "held until 25 codes exist"
    run.stream.feed(12)
    await settle()
    assert run.chunks == []
    run.stream.feed(1)  # the 25th code: out, long before the second window (82 codes) is decodable
    await until(lambda: bool(run.chunks))
    assert run.codec.calls == [12] and run.samples == 10 * SPT
    run.stream.feed(75)
    run.stream.end()
    await run.task
    np.testing.assert_array_equal(np.concatenate(run.chunks), expected(100))
    assert run.stats.samples == 100 * SPT


async def test_an_lm_that_ends_before_the_hold_releases_everything_at_its_end() -> None:
    run = Run(hold_codes=50)
    run.stream.feed(20)
    await until(lambda: run.codec.calls == [12])
    await settle()
    assert run.chunks == []
    run.stream.end()
    await run.task
    assert run.stats.finish_reason == "stop"
    np.testing.assert_array_equal(np.concatenate(run.chunks), expected(20))


async def test_without_a_hold_the_first_window_goes_out_as_soon_as_it_is_decoded() -> None:
    run = Run(hold_codes=0)
    run.stream.feed(12)
    await until(lambda: bool(run.chunks))
    assert run.samples == 10 * SPT
    run.stream.end()
    await run.task
    np.testing.assert_array_equal(np.concatenate(run.chunks), expected(12))


async def test_a_later_parts_audio_goes_out_when_its_listener_gets_there_whatever_the_hold() -> None:
    due = time.monotonic() + 0.3  # the first window is sized by that lead: 6 x 15 codes at most
    run = Run(hold_codes=200, due=due)
    run.stream.feed(92)  # the LM then sends nothing for a while
    await until(lambda: bool(run.codec.calls))
    (decoded,) = run.codec.calls
    assert run.chunks == []
    await until(lambda: bool(run.chunks))
    assert due - HOLD_MARGIN_S - 0.01 <= run.out_at[0] <= due  # just before its listener needs it
    assert run.samples == (decoded - 2) * SPT and run.stats.codes == 92
    run.stream.feed(108)
    run.stream.end()
    await run.task
    np.testing.assert_array_equal(np.concatenate(run.chunks), expected(200))


class TimedStream(PacedStream):
    """A PacedStream that records when it sent each code (time.monotonic())."""

    def __init__(self, codes: list[int], gap_s: float) -> None:
        super().__init__(codes, gap_s)
        self.sent_at: list[float] = []

    async def _deltas(self) -> AsyncIterator[list[int]]:
        async for delta in super()._deltas():
            self.sent_at.append(time.monotonic())
            yield delta


class SlowCodec(Codec):
    async def decode(self, codes: list[int], deadline: float | None = None) -> np.ndarray:
        await asyncio.sleep(0.02)
        return await super().decode(codes, deadline)


async def test_the_first_audio_of_an_lm_near_real_time_waits_for_the_next_cuts_codes() -> None:
    # the first window owns 10 codes (0.2 s), a cut after it at least 20: at 50 codes/s they come 0.4 s
    # after the first window's codes, so its audio goes out about 0.2 s after it was decoded
    cuts = DeadlineCuts(min_cut_tokens=20)
    schedule = StitchSchedule(10, 6.0, 500, 2, 3, 0, cuts=cuts)
    stream, codec = TimedStream(list(range(1, 61)), gap_s=0.02), SlowCodec()
    out_at: list[float] = []
    chunks = []
    async for chunk in synthesize(Source(stream), codec.decode, PARAMS, schedule, UtteranceStats()):
        chunks.append(chunk)
        out_at.append(time.monotonic())
    assert codec.calls[0] == 12
    assert out_at[0] >= stream.sent_at[11] + 0.15  # held (0.2 s less the decode's 0.02 s and its margin)
    np.testing.assert_array_equal(np.concatenate(chunks), expected(60))
