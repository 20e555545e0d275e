"""Response encoders: float32 mono PCM in [-1, 1] -> bytes of the requested ``response_format``.

Every encoder has the same three calls: ``header()`` once before any audio, ``push(pcm)`` per chunk and
``flush()`` at the end; concatenating them gives the response body. An encoder keeps only what its
format needs, so the output never depends on how the PCM was chunked. pcm and wav are written here;
mp3, opus, aac and flac by ``app.audio.compressed``. ``make_encoder`` is the one entry point; to add a
format, write an encoder and register a factory in ``_FACTORIES``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import partial
from typing import Protocol

import numpy as np

from app.audio.compressed import SPECS, AvEncoder
from app.audio.raw import RAW_ENCODINGS, RawEncoder
from app.core.constants import SAMPLE_RATE

# Sizes written by the streaming WAV header, whose length is unknown when it is sent. A "huge" data
# chunk is the usual convention for streamed WAV (players read until EOF). The values stay below
# 2**31 (readers that parse sizes as signed int32 accept them) and are whole 16-bit frames; the RIFF
# size is the data size + 36, as in a real file.
STREAM_DATA_SIZE = 0x7FFFFFFF - 37  # 0x7FFFFFDA
STREAM_RIFF_SIZE = STREAM_DATA_SIZE + 36  # 0x7FFFFFFE


def float_to_pcm16(pcm: np.ndarray) -> bytes:
    """float32 [N] in [-1, 1] (clipped) -> int16 little-endian bytes [2N]."""
    return np.rint(np.clip(pcm, -1.0, 1.0) * 32767).astype("<i2").tobytes()


def wav_header(data_size: int, sample_rate: int = SAMPLE_RATE) -> bytes:
    """44-byte RIFF/WAVE header: PCM, 1 channel, 16 bit, ``data_size`` bytes of samples."""
    channels, bits = 1, 16
    block_align = channels * bits // 8
    fields: tuple[bytes | int, ...] = (b"RIFF", data_size + 36, b"WAVE")
    fields += (b"fmt ", 16, 1, channels, sample_rate, sample_rate * block_align, block_align, bits)
    fields += (b"data", data_size)
    return struct.pack("<4sI4s 4sIHHIIHH 4sI", *fields)


def wav_bytes(pcm: np.ndarray, sample_rate: int = SAMPLE_RATE) -> bytes:
    """A complete WAV file with exact sizes for float32 mono ``pcm`` [N]."""
    data = float_to_pcm16(pcm)
    return wav_header(len(data), sample_rate) + data


class AudioEncoder(Protocol):
    """Turns float32 mono PCM chunks [N] into the bytes of one response body."""

    media_type: str

    def header(self) -> bytes:
        """Bytes to send before any audio (may be empty)."""
        ...

    def push(self, pcm: np.ndarray) -> bytes:
        """Encode one chunk; may return b"" while the format buffers."""
        ...

    def flush(self) -> bytes:
        """Everything still buffered; the encoder is finished afterwards."""
        ...

    def close(self) -> None:
        """Drop what is buffered without finishing (client gone); safe to call twice or after flush.

        Only a shortcut: an encoder that is simply dropped leaks nothing either.
        """
        ...


class PcmEncoder:
    """Raw int16 little-endian mono at 24 kHz, no header (OpenAI ``pcm``)."""

    media_type = "audio/pcm"

    def header(self) -> bytes:
        return b""

    def push(self, pcm: np.ndarray) -> bytes:
        return float_to_pcm16(pcm)

    def flush(self) -> bytes:
        return b""

    def close(self) -> None:
        pass


class WavStreamEncoder(PcmEncoder):
    """Streamed WAV: a header with placeholder sizes (``STREAM_DATA_SIZE``), then raw int16 samples."""

    media_type = "audio/wav"

    def header(self) -> bytes:
        return wav_header(STREAM_DATA_SIZE)  # RIFF size = STREAM_RIFF_SIZE


class WavBufferedEncoder:
    """Buffered WAV with exact sizes: collects the samples and writes the whole file at ``flush``."""

    media_type = "audio/wav"

    def __init__(self) -> None:
        self._chunks: list[bytes] = []

    def header(self) -> bytes:
        return b""

    def push(self, pcm: np.ndarray) -> bytes:
        self._chunks.append(float_to_pcm16(pcm))
        return b""

    def flush(self) -> bytes:
        data = b"".join(self._chunks)
        self._chunks = []
        return wav_header(len(data)) + data

    def close(self) -> None:
        self._chunks = []


_FACTORIES: dict[str, Callable[[bool], AudioEncoder]] = {
    "pcm": lambda stream: PcmEncoder(),
    "wav": lambda stream: WavStreamEncoder() if stream else WavBufferedEncoder(),
    **{fmt: partial(AvEncoder, spec) for fmt, spec in SPECS.items()},  # mp3, opus, aac, flac
}
SUPPORTED_FORMATS = tuple(_FACTORIES)


def make_encoder(fmt: str, stream: bool, rate: int = SAMPLE_RATE) -> AudioEncoder:
    """A fresh encoder for ``response_format`` ``fmt``; ``stream`` selects the streamed variant. The raw
    encodings of realtime streams (``app.audio.raw``: ``pcm_s16le``, ``pcm_f32le``, ``pcm_mulaw``,
    ``pcm_alaw``) take any ``rate``; the response formats are 24 kHz."""
    if fmt in RAW_ENCODINGS:
        return RawEncoder(fmt, rate)
    if rate != SAMPLE_RATE:
        raise ValueError(f"response_format {fmt!r} is {SAMPLE_RATE} Hz only; {rate} Hz needs a raw encoding")
    try:
        factory = _FACTORIES[fmt]
    except KeyError:
        raise ValueError(
            f"unsupported response_format {fmt!r}; expected one of {SUPPORTED_FORMATS}"
        ) from None
    return factory(stream)
