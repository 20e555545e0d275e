"""Raw sample encodings of realtime streams, at any sample rate: 16-bit and 32-bit float PCM, and
G.711 mu-law and A-law (telephony).

G.711 is written here with numpy (ITU-T G.711, the segment-and-mantissa companding of 14-bit linear
for mu-law and 13-bit for A-law; equal to the standard library's codec on every 16-bit value): the
standard library's ``audioop`` is deprecated and is gone from Python 3.13, and the encoding is a few
lines. The rate change (24 kHz to the stream's rate) is soxr's
streaming resampler, so the output does not depend on how the PCM was chunked.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.core.constants import SAMPLE_RATE

RAW_ENCODINGS = ("pcm_s16le", "pcm_f32le", "pcm_mulaw", "pcm_alaw")
MEDIA_TYPES = {
    "pcm_s16le": "audio/pcm",
    "pcm_f32le": "audio/pcm;encoding=float",
    "pcm_mulaw": "audio/basic",
    "pcm_alaw": "audio/x-alaw-basic",
}
MIN_RATE, MAX_RATE = 8_000, 48_000

_MU_END = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF])
_A_END = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF])


def _int16(pcm: np.ndarray) -> np.ndarray:
    return np.rint(np.clip(pcm, -1.0, 1.0) * 32767).astype(np.int32)


def mulaw(pcm: np.ndarray) -> bytes:
    """float32 [N] in [-1, 1] -> G.711 mu-law bytes [N] (14-bit linear, bias 33, 8 segments)."""
    x = _int16(pcm) >> 2
    mask = np.where(x < 0, 0x7F, 0xFF)
    x = np.minimum(np.abs(x), 8159) + 0x21
    seg = np.searchsorted(_MU_END, x, side="left")
    value = (np.minimum(seg, 7) << 4) | ((x >> (np.minimum(seg, 7) + 1)) & 0x0F)
    value = np.where(seg >= 8, 0x7F, value)
    return ((value ^ mask) & 0xFF).astype(np.uint8).tobytes()


def alaw(pcm: np.ndarray) -> bytes:
    """float32 [N] in [-1, 1] -> G.711 A-law bytes [N] (13-bit linear, 8 segments, even bits inverted)."""
    x = _int16(pcm) >> 3
    mask = np.where(x >= 0, 0xD5, 0x55)
    x = np.where(x >= 0, x, -x - 1)
    seg = np.searchsorted(_A_END, x, side="left")
    low = np.minimum(seg, 7)
    value = (low << 4) | np.where(low < 2, (x >> 1) & 0x0F, (x >> low) & 0x0F)
    value = np.where(seg >= 8, 0x7F, value)
    return ((value ^ mask) & 0xFF).astype(np.uint8).tobytes()


def encode_raw(encoding: str, pcm: np.ndarray) -> bytes:
    """float32 [N] -> the bytes of ``encoding`` (one of ``RAW_ENCODINGS``)."""
    if encoding == "pcm_s16le":
        return np.rint(np.clip(pcm, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    if encoding == "pcm_f32le":
        return np.clip(pcm, -1.0, 1.0).astype("<f4").tobytes()
    if encoding == "pcm_mulaw":
        return mulaw(pcm)
    if encoding == "pcm_alaw":
        return alaw(pcm)
    raise ValueError(f"unknown raw encoding {encoding!r}; expected one of {RAW_ENCODINGS}")


class RawEncoder:
    """A raw encoding at ``rate`` Hz: no header, samples as they come (resampled from 24 kHz)."""

    def __init__(self, encoding: str, rate: int = SAMPLE_RATE) -> None:
        if encoding not in RAW_ENCODINGS:
            raise ValueError(f"unknown raw encoding {encoding!r}; expected one of {RAW_ENCODINGS}")
        if not MIN_RATE <= rate <= MAX_RATE:
            raise ValueError(f"sample_rate must be {MIN_RATE}..{MAX_RATE}, got {rate}")
        self.encoding = encoding
        self.rate = rate
        self.media_type = f"{MEDIA_TYPES[encoding]};rate={rate}"
        self._resampler: Any = None
        if rate != SAMPLE_RATE:
            import soxr

            self._resampler = soxr.ResampleStream(SAMPLE_RATE, rate, 1, dtype="float32", quality="HQ")

    def header(self) -> bytes:
        return b""

    def push(self, pcm: np.ndarray) -> bytes:
        if self._resampler is not None:
            pcm = self._resampler.resample_chunk(np.asarray(pcm, dtype=np.float32))
        return encode_raw(self.encoding, pcm) if len(pcm) else b""

    def flush(self) -> bytes:
        if self._resampler is None:
            return b""
        tail = self._resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        return encode_raw(self.encoding, tail) if len(tail) else b""

    def close(self) -> None:
        self._resampler = None
