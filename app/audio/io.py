"""Reading uploaded reference audio: size-capped read, decode, downmix, resample to 16 kHz.

Uploads may be wav, flac, ogg (vorbis/opus) or mp3 (libsndfile reads them all); anything else
PyAV/FFmpeg can open (m4a, webm, ...) is tried next. Both decoders check the duration as they go, so
a small file that expands to hours of audio is rejected without being decoded whole. Every failure is
an ``InvalidRequest`` (400) naming the form field; a body over the size cap is ``PayloadTooLarge``
(413) and is detected while reading, before any decoding. ``load_reference`` is CPU work: callers run
it in a worker thread, which is also where soundfile, soxr and PyAV are first imported (~250 ms).
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.core.errors import InvalidRequest, PayloadTooLarge

REFERENCE_RATE = 16000
"""Sample rate of the NeuCodec encoder's input."""

READ_CHUNK_BYTES = 1 << 20


class AsyncReadable(Protocol):
    """What ``read_limited`` needs of an upload (Starlette's ``UploadFile`` fits)."""

    async def read(self, size: int = -1) -> bytes: ...


@dataclass(frozen=True)
class ReferenceAudio:
    """A decoded reference: float32 mono samples at 16 kHz, shape (S,), and their SHA-256 (hex)."""

    samples: np.ndarray
    digest: str

    @property
    def duration_s(self) -> float:
        return self.samples.shape[0] / REFERENCE_RATE


async def read_limited(upload: AsyncReadable, limit: int, param: str) -> bytes:
    """All bytes of ``upload``, or PayloadTooLarge as soon as more than ``limit`` have been read."""
    parts: list[bytes] = []
    total = 0
    while chunk := await upload.read(READ_CHUNK_BYTES):
        total += len(chunk)
        if total > limit:
            raise PayloadTooLarge(f"{param}: the upload is larger than the {limit}-byte limit", param=param)
        parts.append(chunk)
    return b"".join(parts)


def _too_long(param: str, max_s: float) -> InvalidRequest:
    return InvalidRequest(
        f"{param}: the audio is longer than {max_s:g} s", param=param, code="audio_too_long"
    )


def _decode_soundfile(data: bytes, max_s: float, param: str) -> tuple[np.ndarray, int]:
    """(samples, channels) float32 and the sample rate, via libsndfile; raises sf.LibsndfileError."""
    import soundfile as sf

    with sf.SoundFile(io.BytesIO(data)) as handle:
        rate = handle.samplerate
        if handle.frames > max_s * rate + rate:  # the header's count (an estimate for mp3), 1 s slack
            raise _too_long(param, max_s)
        frames = int(max_s * rate) + rate
        return handle.read(frames, dtype="float32", always_2d=True), rate


def _decode_pyav(data: bytes, max_s: float, param: str) -> tuple[np.ndarray, int]:
    """(samples, channels) float32 and the sample rate, via FFmpeg; raises av.FFmpegError or ValueError."""
    import av

    with av.open(io.BytesIO(data), mode="r") as container:
        streams = container.streams.audio
        if not streams:
            raise ValueError("no audio stream")
        stream = streams[0]
        planar = av.AudioResampler(format="fltp")  # keeps layout and rate; float32 planes
        blocks: list[np.ndarray] = []
        count = 0
        rate = 0
        for frame in container.decode(stream):
            for out in planar.resample(frame):
                rate = out.sample_rate
                block = out.to_ndarray()  # [channels, n]
                blocks.append(block)
                count += block.shape[1]
                if count > max_s * rate + rate:
                    raise _too_long(param, max_s)
        for out in planar.resample(None):
            rate = out.sample_rate
            blocks.append(out.to_ndarray())
    if not blocks or rate <= 0:
        raise ValueError("no audio frames")
    width = min(block.shape[0] for block in blocks)
    return np.concatenate([block[:width] for block in blocks], axis=1).T, rate  # [n, channels]


def decode_audio(data: bytes, max_s: float, param: str) -> tuple[np.ndarray, int]:
    """Decode ``data`` to float32 ``(samples, channels)`` and its rate. Raises InvalidRequest."""
    import av
    import soundfile as sf

    if not data:
        raise InvalidRequest(f"{param}: the upload is empty", param=param, code="invalid_audio")
    try:
        return _decode_soundfile(data, max_s, param)
    except sf.LibsndfileError:
        pass
    try:
        return _decode_pyav(data, max_s, param)
    except (av.FFmpegError, ValueError) as exc:
        raise InvalidRequest(
            f"{param}: not a readable audio file (wav, flac, ogg/opus or mp3 expected)",
            param=param,
            code="invalid_audio",
        ) from exc


def load_reference(data: bytes, *, min_s: float, max_s: float, param: str) -> ReferenceAudio:
    """Uploaded bytes -> mono 16 kHz float32 within [min_s, max_s] seconds. Raises InvalidRequest."""
    import soxr

    frames, rate = decode_audio(data, max_s, param)
    mono = frames.mean(axis=1, dtype=np.float32) if frames.shape[1] > 1 else frames[:, 0]
    if mono.shape[0] < min_s * rate:
        raise InvalidRequest(
            f"{param}: the audio is shorter than {min_s:g} s", param=param, code="audio_too_short"
        )
    if mono.shape[0] > max_s * rate:
        raise _too_long(param, max_s)
    if not np.isfinite(mono).all():
        raise InvalidRequest(
            f"{param}: the audio has NaN or infinite samples", param=param, code="invalid_audio"
        )
    samples = mono if rate == REFERENCE_RATE else soxr.resample(mono, rate, REFERENCE_RATE, quality="HQ")
    samples = np.ascontiguousarray(samples, dtype=np.float32)
    return ReferenceAudio(samples, hashlib.sha256(samples.tobytes()).hexdigest())
