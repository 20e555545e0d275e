"""One utterance through the stages: LM speech codes -> stitcher (-> codec) -> float32 PCM chunks.

Server-independent: the speech route, benchmarks and tests drive it the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import numpy as np

from app.audio.stitcher import Stitcher, StitchSchedule
from app.lm.types import FinishReason, GenerationParams, TokenSource

Decode = Callable[[list[int]], Awaitable[np.ndarray]]


@dataclass
class UtteranceStats:
    """What one synthesis consumed and produced, filled in as it runs."""

    codes: int = 0  # speech tokens generated
    prompt_tokens: int | None = None  # LM tokens in the prompt, when the backend reports them
    finish_reason: FinishReason | None = None  # set once the LM stream ends, before the last decodes
    tokens: list[int] = field(default_factory=list)  # the generated codes, in order


async def synthesize(
    source: TokenSource,
    decode: Decode,
    params: GenerationParams,
    schedule: StitchSchedule,
    stats: UtteranceStats | None = None,
) -> AsyncIterator[np.ndarray]:
    """Yield float32 mono 24 kHz chunks, shape (samples,), as the LM produces codes.

    Exactly 480 samples per generated code in total. Closing or cancelling the iterator aborts the
    generation upstream (the LM stream is closed even when the task is being cancelled).
    """
    stats = stats if stats is not None else UtteranceStats()
    stream = source.generate(params)
    stitcher = Stitcher(decode, schedule)
    try:
        async for codes in stream:
            stats.codes += len(codes)
            stats.tokens += codes
            for chunk in await stitcher.push(codes):
                yield chunk
        stats.finish_reason = stream.finish_reason
        for chunk in await stitcher.flush():
            yield chunk
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
        stats.prompt_tokens = stream.prompt_tokens
        stats.finish_reason = stream.finish_reason
