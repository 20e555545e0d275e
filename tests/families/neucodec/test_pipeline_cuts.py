"""synthesize with deadline cuts: while it waits for a slow LM, a window is cut at the codes that exist
when the listener is about to run dry; an LM that sends everything at once is never cut; closing the
stream while it waits for codes closes the LM stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np

from app.audio.stitcher import DeadlineCuts, StitchSchedule
from app.core.stats import UtteranceStats
from app.core.types import FinishReason
from app.families.neucodec.lm.types import GenerationParams, TokenStream
from app.families.neucodec.pipeline import synthesize

SPT = 480
PARAMS = GenerationParams(prompt="p", model="m", max_tokens=1000, temperature=0.0, repetition_penalty=1.0)
CUTS = DeadlineCuts(min_margin_s=0.05, margin_factor=0.0, min_cut_tokens=3, cut_growth=1.0)
SCHEDULE = StitchSchedule(10, 6.0, 500, 2, 3, 0, cuts=CUTS)  # first 10 codes, then 60: needs 82


class PacedStream:
    """``codes`` one per ``gap_s`` (all at once when 0); records whether it was closed."""

    def __init__(self, codes: list[int], gap_s: float) -> None:
        self.codes = codes
        self.gap_s = gap_s
        self.closed = False
        self.finish_reason: FinishReason | None = None
        self.prompt_tokens: int | None = None

    async def _deltas(self) -> AsyncIterator[list[int]]:
        if not self.gap_s:
            yield self.codes
        else:
            for code in self.codes:
                await asyncio.sleep(self.gap_s)
                yield [code]
        self.finish_reason = "length"

    def __aiter__(self) -> AsyncIterator[list[int]]:
        return self._deltas()

    async def aclose(self) -> None:
        self.closed = True


class Source:
    """A TokenSource whose one generation is ``stream``."""

    name = "scripted"

    def __init__(self, stream: TokenStream) -> None:
        self.stream = stream

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def ready(self) -> bool:
        return True

    def generate(self, params: GenerationParams) -> TokenStream:
        return self.stream


class Codec:
    def __init__(self) -> None:
        self.calls: list[int] = []

    async def decode(self, codes: list[int], deadline: float | None = None) -> np.ndarray:
        self.calls.append(len(codes))
        return np.repeat(np.asarray(codes, dtype=np.float32) / 1000, SPT)


async def run(stream: PacedStream) -> tuple[np.ndarray, Codec, UtteranceStats]:
    codec, stats = Codec(), UtteranceStats()
    chunks = [c async for c in synthesize(Source(stream), codec.decode, PARAMS, SCHEDULE, stats)]
    return np.concatenate(chunks), codec, stats


async def test_a_slow_lm_gets_windows_cut_at_its_deadlines() -> None:
    codes = list(range(1, 41))
    audio, codec, stats = await run(PacedStream(codes, gap_s=0.012))  # 83 codes/s: 1.7x real time
    # a one-code-per-event LM would need 82 codes before the second planned window: it is cut instead
    assert len(codec.calls) > 2 and codec.calls[0] == 12
    np.testing.assert_array_equal(audio, np.repeat(np.asarray(codes, dtype=np.float32) / 1000, SPT))
    assert stats.samples == 40 * SPT


async def test_an_instant_lm_is_never_cut() -> None:
    codes = list(range(1, 41))
    _, codec, stats = await run(PacedStream(codes, gap_s=0.0))
    assert codec.calls == [12, 33]  # the planned first window, then the last one (3 past + 30)
    assert stats.samples == 40 * SPT


async def test_closing_while_waiting_for_codes_closes_the_lm_stream() -> None:
    stream = PacedStream(list(range(1, 200)), gap_s=0.05)
    chunks = synthesize(Source(stream), Codec().decode, PARAMS, SCHEDULE, UtteranceStats())
    first = await anext(chunks)
    assert first.size == 10 * SPT
    await chunks.aclose()
    assert stream.closed
