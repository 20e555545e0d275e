"""Reading one reference clip from an upload: the size cap while reading, then decoding on the upload
decoder's own threads (``app.audio.decoder_pool``), never the streams' thread pool."""

from __future__ import annotations

from app.audio.decoder_pool import ReferenceDecoder
from app.audio.io import REFERENCE_RATE, AsyncReadable, ReferenceAudio, read_limited
from app.core.settings import ServerSettings


async def read_upload(settings: ServerSettings, upload: AsyncReadable, param: str) -> bytes:
    """The upload's bytes (413 past MAX_UPLOAD_BYTES)."""
    return await read_limited(upload, settings.MAX_UPLOAD_BYTES, param)


async def read_reference(
    settings: ServerSettings,
    decoder: ReferenceDecoder,
    upload: AsyncReadable,
    param: str,
    rate: int = REFERENCE_RATE,
) -> ReferenceAudio:
    """Read ``upload`` (413 past MAX_UPLOAD_BYTES), then decode it to mono at ``rate`` (400 for anything
    but allowed audio, 503 when every decoder thread stays busy)."""
    return await decoder.decode(await read_upload(settings, upload, param), param, rate)
