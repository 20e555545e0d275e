"""Reading one reference clip from an upload: the size cap while reading, then decoding off the loop."""

from __future__ import annotations

import asyncio

from app.audio.io import AsyncReadable, ReferenceAudio, load_reference, read_limited
from app.config import Settings


async def read_reference(settings: Settings, upload: AsyncReadable, param: str) -> ReferenceAudio:
    """Read ``upload`` (413 past MAX_UPLOAD_BYTES), then decode it to 16 kHz mono in a worker thread."""
    data = await read_limited(upload, settings.MAX_UPLOAD_BYTES, param)
    return await asyncio.to_thread(
        load_reference,
        data,
        min_s=settings.MIN_REFERENCE_S,
        max_s=settings.MAX_REFERENCE_S,
        param=param,
    )
