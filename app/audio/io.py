"""Reading uploaded reference audio: size-capped read, decode, downmix, resample to 16 kHz.

An upload is decoded only when its first bytes are one of the allowed containers (``app.audio.sniff``:
wav, flac, ogg, mp3, m4a/mp4, webm/mka); libsndfile reads the first four, FFmpeg (PyAV) the rest and
whatever libsndfile cannot, restricted to that one demuxer, its audio decoders and no protocol, so
an upload can never make the server open a file or a socket. Both decoders check the duration as they
go, so a small file that expands to hours of audio is rejected without being decoded whole, and a
deadline between blocks (FFmpeg's interrupt callback inside its own calls) bounds the time one decode
holds its thread. Every failure is an ``InvalidRequest`` (400) naming the form field; a body over the
size cap is ``PayloadTooLarge`` (413) and is detected while reading, before any decoding.
``load_reference`` is CPU work: the server runs it on the upload decoder's own threads
(``app.audio.decoder_pool``), which is also where soundfile, soxr and PyAV are first imported.
"""

from __future__ import annotations

import hashlib
import io
import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.audio.sniff import ALLOWED_DESCRIPTION, Container, sniff
from app.core.errors import InvalidRequest, PayloadTooLarge

REFERENCE_RATE = 16000
"""Sample rate of the NeuCodec encoder's input."""

READ_CHUNK_BYTES = 1 << 20
DECODE_TIMEOUT_S = 10.0
"""Default time limit of one decode (the server passes UPLOAD_DECODE_TIMEOUT_S)."""


class AsyncReadable(Protocol):
    """What ``read_limited`` needs of an upload (Starlette's ``UploadFile`` fits)."""

    async def read(self, size: int = -1) -> bytes: ...


@dataclass(frozen=True)
class ReferenceAudio:
    """A decoded reference: float32 mono samples at ``rate`` (16 kHz for NeuCodec, 24 kHz for the MOSS
    codec), shape (S,), and their SHA-256 (hex), the cache key of their codes."""

    samples: np.ndarray
    digest: str
    rate: int = REFERENCE_RATE

    @property
    def duration_s(self) -> float:
        return self.samples.shape[0] / self.rate


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


class Deadline:
    """A decode's time limit, checked between blocks of work (the thread is freed when it passes)."""

    def __init__(self, seconds: float, param: str) -> None:
        self.seconds = seconds
        self.param = param
        self.ends = time.monotonic() + seconds

    def check(self) -> None:
        """Raise InvalidRequest (code ``decode_timeout``) once the limit has passed."""
        if time.monotonic() > self.ends:
            raise InvalidRequest(
                f"{self.param}: decoding took longer than {self.seconds:g} s",
                param=self.param,
                code="decode_timeout",
            )


def _decode_soundfile(data: bytes, max_s: float, deadline: Deadline) -> tuple[np.ndarray, int]:
    """(samples, channels) float32 and the sample rate, via libsndfile; raises sf.LibsndfileError."""
    import soundfile as sf

    with sf.SoundFile(io.BytesIO(data)) as handle:
        rate = handle.samplerate
        if handle.frames > max_s * rate + rate:  # the header's count (an estimate for mp3), 1 s slack
            raise _too_long(deadline.param, max_s)
        remaining = int(max_s * rate) + rate
        blocks: list[np.ndarray] = []
        while remaining > 0:
            block = handle.read(min(remaining, rate), dtype="float32", always_2d=True)
            deadline.check()
            if not block.shape[0]:
                break
            blocks.append(block)
            remaining -= block.shape[0]
        if not blocks:
            return np.zeros((0, max(handle.channels, 1)), dtype=np.float32), rate
        return np.concatenate(blocks), rate


def _decode_pyav(
    data: bytes, container: Container, max_s: float, deadline: Deadline
) -> tuple[np.ndarray, int]:
    """(samples, channels) float32 and the sample rate, via FFmpeg restricted to ``container``'s
    demuxer and decoders, with no protocol allowed; raises av.FFmpegError or ValueError."""
    import av

    options = {
        "format_whitelist": container.demuxer,
        "codec_whitelist": ",".join(container.decoders),
        "protocol_whitelist": "none",
    }
    timeout = max(deadline.ends - time.monotonic(), 0.01)
    with av.open(
        io.BytesIO(data), mode="r", format=container.demuxer, options=options, timeout=timeout
    ) as container_:
        streams = container_.streams.audio
        if not streams:
            raise ValueError("no audio stream")
        stream = streams[0]
        planar = av.AudioResampler(format="fltp")  # keeps layout and rate; float32 planes
        blocks: list[np.ndarray] = []
        count = 0
        rate = 0
        for frame in container_.decode(stream):
            deadline.check()
            for out in planar.resample(frame):
                rate = out.sample_rate
                block = out.to_ndarray()  # [channels, n]
                blocks.append(block)
                count += block.shape[1]
                if count > max_s * rate + rate:
                    raise _too_long(deadline.param, max_s)
        for out in planar.resample(None):
            rate = out.sample_rate
            blocks.append(out.to_ndarray())
    if not blocks or rate <= 0:
        raise ValueError("no audio frames")
    width = min(block.shape[0] for block in blocks)
    return np.concatenate([block[:width] for block in blocks], axis=1).T, rate  # [n, channels]


def decode_audio(data: bytes, max_s: float, param: str, timeout_s: float) -> tuple[np.ndarray, int]:
    """Decode ``data`` to float32 ``(samples, channels)`` and its rate within ``timeout_s`` seconds.

    Only a container on the allow-list (``app.audio.sniff``), recognised from the bytes, is decoded.
    Raises InvalidRequest.
    """
    import av
    import soundfile as sf

    if not data:
        raise InvalidRequest(f"{param}: the upload is empty", param=param, code="invalid_audio")
    container = sniff(data)
    if container is None:
        raise InvalidRequest(
            f"{param}: not a supported audio file ({ALLOWED_DESCRIPTION} expected)",
            param=param,
            code="invalid_audio",
        )
    deadline = Deadline(timeout_s, param)
    if container.libsndfile:
        try:
            return _decode_soundfile(data, max_s, deadline)
        except sf.LibsndfileError:
            deadline.check()
    try:
        return _decode_pyav(data, container, max_s, deadline)
    except av.ExitError as exc:  # the open/read timeout's interrupt
        raise InvalidRequest(
            f"{param}: decoding took longer than {timeout_s:g} s", param=param, code="decode_timeout"
        ) from exc
    except (av.FFmpegError, ValueError) as exc:
        raise InvalidRequest(
            f"{param}: not a readable {container.kind} audio file ({ALLOWED_DESCRIPTION} expected)",
            param=param,
            code="invalid_audio",
        ) from exc


def load_reference(
    data: bytes,
    *,
    min_s: float,
    max_s: float,
    param: str,
    timeout_s: float = DECODE_TIMEOUT_S,
    rate: int = REFERENCE_RATE,
) -> ReferenceAudio:
    """Uploaded bytes -> mono float32 at ``rate`` within [min_s, max_s] seconds, decoded within
    ``timeout_s``. Raises InvalidRequest."""
    import soxr

    frames, source_rate = decode_audio(data, max_s, param, timeout_s)
    mono = frames.mean(axis=1, dtype=np.float32) if frames.shape[1] > 1 else frames[:, 0]
    if mono.shape[0] < min_s * source_rate:
        raise InvalidRequest(
            f"{param}: the audio is shorter than {min_s:g} s", param=param, code="audio_too_short"
        )
    if mono.shape[0] > max_s * source_rate:
        raise _too_long(param, max_s)
    if not np.isfinite(mono).all():
        raise InvalidRequest(
            f"{param}: the audio has NaN or infinite samples", param=param, code="invalid_audio"
        )
    samples = mono if source_rate == rate else soxr.resample(mono, source_rate, rate, quality="HQ")
    samples = np.ascontiguousarray(samples, dtype=np.float32)
    return ReferenceAudio(samples, hashlib.sha256(samples.tobytes()).hexdigest(), rate)
