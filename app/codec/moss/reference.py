"""Voice-prompt audio for the MOSS codec: an upload decoded, downmixed and resampled to 24 kHz.

The same decoders and checks as NeuCodec references (``app.audio.io.decode_audio``: wav, flac, ogg/opus,
mp3, then anything FFmpeg reads; duration bounds; finite samples), at the MOSS codec's rate. CPU work:
call it in a worker thread.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from app.errors import InvalidRequest

MOSS_RATE = 24000


@dataclass(frozen=True)
class MossReference:
    """Float32 mono samples at 24 kHz, shape (S,), and their SHA-256 (hex): the cache key of their codes."""

    samples: np.ndarray
    digest: str

    @property
    def duration_s(self) -> float:
        return self.samples.shape[0] / MOSS_RATE


def load_moss_reference(data: bytes, *, min_s: float, max_s: float, param: str) -> MossReference:
    """Uploaded bytes -> mono 24 kHz float32 within [min_s, max_s] seconds. Raises InvalidRequest."""
    import soxr

    from app.audio.io import decode_audio

    frames, rate = decode_audio(data, max_s, param)
    mono = frames.mean(axis=1, dtype=np.float32) if frames.shape[1] > 1 else frames[:, 0]
    if mono.shape[0] < min_s * rate:
        raise InvalidRequest(
            f"{param}: the audio is shorter than {min_s:g} s", param=param, code="audio_too_short"
        )
    if mono.shape[0] > max_s * rate:
        raise InvalidRequest(
            f"{param}: the audio is longer than {max_s:g} s", param=param, code="audio_too_long"
        )
    if not np.isfinite(mono).all():
        raise InvalidRequest(
            f"{param}: the audio has NaN or infinite samples", param=param, code="invalid_audio"
        )
    samples = mono if rate == MOSS_RATE else soxr.resample(mono, rate, MOSS_RATE, quality="HQ")
    samples = np.ascontiguousarray(samples, dtype=np.float32)
    return MossReference(samples, hashlib.sha256(samples.tobytes()).hexdigest())
