"""OpenAI speech SSE framing: ``speech.audio.delta`` events, then ``speech.audio.done`` with usage.

Each delta carries base64 of bytes in the requested ``response_format`` (LiveKit decodes the
concatenated deltas as that format). After the done event comes ``data: [DONE]`` (LiveKit's plugin
stops there). A failure after the stream started sends one ``error`` event and no done event, so a
client can tell a cut stream from a complete one.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator, Sequence

from app.core.errors import APIError
from app.core.stats import UtteranceStats

log = logging.getLogger(__name__)


def _event(payload: dict[str, object]) -> bytes:
    return f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


async def sse_events(
    encoded: AsyncIterator[bytes], stats: UtteranceStats, ssml_ignored: Sequence[str] = ()
) -> AsyncIterator[bytes]:
    """Frame the encoded audio as SSE events; ``stats`` supplies the usage counts at the end, and the
    done event names the SSML that was read as plain text (``ssml_ignored``) when there was any."""
    try:
        async for data in encoded:
            yield _event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")})
    except Exception as exc:
        error = exc if isinstance(exc, APIError) else APIError("Internal server error")
        log.warning("SSE stream failed after audio started: %s %r", error.status, exc)
        yield _event({"type": "error", "error": error.body()["error"]})
        return
    input_tokens = stats.prompt_tokens or 0  # the family estimates it when the backend does not say
    usage = {
        "input_tokens": input_tokens,
        "output_tokens": stats.codes,
        "total_tokens": input_tokens + stats.codes,
    }
    done: dict[str, object] = {"type": "speech.audio.done", "usage": usage}
    if ssml_ignored:
        done["ssml_ignored"] = list(ssml_ignored)
    yield _event(done)
    yield b"data: [DONE]\n\n"
