"""Reading one reference clip from an upload: the size cap while reading, then decoding on the upload
decoder's own threads (``app.audio.decoder_pool``), never the streams' thread pool."""

from __future__ import annotations

from app.audio.decoder_pool import ReferenceDecoder
from app.audio.io import AsyncReadable, ReferenceAudio, read_limited
from app.config import Settings


async def read_reference(
    settings: Settings, decoder: ReferenceDecoder, upload: AsyncReadable, param: str
) -> ReferenceAudio:
    """Read ``upload`` (413 past MAX_UPLOAD_BYTES), then decode it to 16 kHz mono (400 for anything but
    allowed audio, 503 when every decoder thread stays busy)."""
    data = await read_limited(upload, settings.MAX_UPLOAD_BYTES, param)
    return await decoder.decode(data, param)
