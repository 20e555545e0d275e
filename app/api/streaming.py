"""The three response shapes of a synthesis: the whole file, a raw audio stream, or OpenAI SSE events."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from fastapi.responses import Response, StreamingResponse

from app.api.sse import sse_events
from app.core.errors import APIError
from app.synthesis.service import Synthesis

log = logging.getLogger(__name__)

STREAM_HEADERS = {"Cache-Control": "no-cache, no-store", "X-Accel-Buffering": "no"}
PCM_HEADERS = {"X-Audio-Sample-Rate": "24000", "X-Audio-Channels": "1", "X-Audio-Bit-Depth": "16"}


async def audio_response(synthesis: Synthesis) -> Response:
    """The response its plan asks for: whole (``stream`` false), SSE events, or raw audio bytes."""
    plan, extra = synthesis.plan, synthesis.headers
    headers = {**(PCM_HEADERS if plan.post.response_format == "pcm" else {}), **extra}
    if not plan.post.stream:
        return Response(await synthesis.whole(), media_type=synthesis.media_type, headers=headers)
    if plan.stream_format == "sse":
        events = sse_events(synthesis.encoded(), synthesis.stats, synthesis.plan.ignored)
        return StreamingResponse(events, media_type="text/event-stream", headers={**STREAM_HEADERS, **extra})
    return StreamingResponse(
        _audio_body(synthesis.encoded()),
        media_type=synthesis.media_type,
        headers={**STREAM_HEADERS, **headers},
    )


async def _audio_body(encoded: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Raw audio body. A failure after the first byte aborts the connection (logged), so a client
    never mistakes a cut stream for a complete one."""
    try:
        async for data in encoded:
            yield data
    except APIError as exc:
        log.warning("stream aborted after audio started: %s %s", exc.status, exc.message)
        raise
