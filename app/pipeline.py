"""One utterance through the stages: LM speech codes -> stitcher (-> codec) -> float32 PCM chunks.

Server-independent: the speech route, benchmarks and tests drive it the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import numpy as np

from app.audio.stitcher import Stitcher, StitchSchedule
from app.lm.types import GenerationParams, TokenSource

Decode = Callable[[list[int]], Awaitable[np.ndarray]]


async def synthesize(
    source: TokenSource, decode: Decode, params: GenerationParams, schedule: StitchSchedule
) -> AsyncIterator[np.ndarray]:
    """Yield float32 mono 24 kHz chunks, shape (samples,), as the LM produces codes.

    Exactly 480 samples per generated code in total. Closing or cancelling the iterator aborts the
    generation upstream (the LM stream is closed even when the task is being cancelled).
    """
    stream = source.generate(params)
    stitcher = Stitcher(decode, schedule)
    try:
        async for codes in stream:
            for chunk in await stitcher.push(codes):
                yield chunk
        for chunk in await stitcher.flush():
            yield chunk
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
