"""Reading one uploaded clip: its bytes, with the size cap applied while reading (decoding is the upload
decoder's, ``app.audio.decoder_pool``, on its own threads)."""

from __future__ import annotations

from app.audio.io import AsyncReadable, read_limited
from app.core.settings import ServerSettings


async def read_upload(settings: ServerSettings, upload: AsyncReadable, param: str) -> bytes:
    """The upload's bytes (413 past MAX_UPLOAD_BYTES)."""
    return await read_limited(upload, settings.MAX_UPLOAD_BYTES, param)
