"""One decode of an utterance's codes into audio, timed into its stats and traced, the same for every
family: a ``tts.chunk`` span (index, codes, last or not, samples) around a ``codec.decode`` span."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import numpy as np

from app.core.stats import UtteranceStats
from app.observability.tracing import span


async def traced_decode(
    stats: UtteranceStats, codes: int, last: bool, decode: Callable[[], Awaitable[np.ndarray]]
) -> np.ndarray:
    """``decode()``'s float32 audio ``(samples,)`` for ``codes`` codes (frames), counted in
    ``stats.decodes`` and ``stats.decode_wait_s``; ``last``: the utterance's last decode."""
    index = stats.decodes
    stats.decodes += 1
    attributes = {"chunk.index": index, "chunk.decode_tokens": codes, "chunk.is_last": last}
    with span("tts.chunk", attributes) as chunk:
        with span("codec.decode", {"codec.tokens": codes}):
            started = time.perf_counter()
            audio = await decode()
            stats.decode_wait_s += time.perf_counter() - started
        chunk.set({"chunk.samples": len(audio)})
    return audio
