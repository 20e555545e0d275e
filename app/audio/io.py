"""Reading uploaded reference audio: size-capped read, then one decode to mono at every rate asked for.

An upload is decoded only when its first bytes are one of the allowed containers (``app.audio.sniff``:
wav, flac, ogg, mp3, m4a/mp4, webm/mka); libsndfile reads the first four, FFmpeg (PyAV) the rest and
whatever libsndfile cannot, restricted to that one demuxer, its audio decoders and no protocol, so
an upload can never make the server open a file or a socket. Every failure is an ``InvalidRequest``
(400) naming the form field; a body over the size cap is ``PayloadTooLarge`` (413) and is detected while
reading, before any decoding. ``load_references`` is CPU work: the server runs it on the upload decoder's
own threads (``app.audio.decoder_pool``), which is also where soundfile, soxr and PyAV are first imported.

**What a decode may cost.** A few kilobytes of FLAC or Vorbis can declare hours of audio, 255 channels or
a rate of 655 kHz. So what the file declares is checked before anything is allocated: at most
``MAX_CHANNELS`` channels and a rate within ``SOURCE_RATES``, and a duration (the header's, then the
frames as they come) within ``max_s``. The audio is then taken block by block (at most ``BLOCK_SAMPLES``
samples over all channels): each block is checked (finite, within ``MAX_SAMPLE``), downmixed to mono and
fed to one streaming resampler per output rate (soxr; its output equals the one-shot resample), so no
array of the file's full width, rate or length ever exists, and the clip is decoded once for every rate
a registration needs. The memory of one decode is therefore bounded whatever the upload is: the mono
outputs (``max_s`` x the sum of the rates x 4 bytes, twice while they are joined: 9.6 MB for 30 s at 16 and
24 kHz) plus a few blocks (``BLOCK_SAMPLES`` x 4 bytes each, 1 MiB) and the decoders' own frame buffers;
``tests/audio/test_decode_memory.py`` asserts it for the worst uploads at the size cap. A deadline
between blocks (FFmpeg's interrupt callback inside its own calls) bounds the time one decode holds its
thread.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.audio.sniff import ALLOWED_DESCRIPTION, Container, sniff
from app.core.errors import InvalidRequest, PayloadTooLarge

REFERENCE_RATE = 16000
"""Sample rate of the NeuCodec encoder's input."""

MAX_CHANNELS = 8
"""Most channels an upload may declare (7.1); more is refused before decoding."""
SOURCE_RATES = (4_000, 192_000)
"""The sample rates an upload may declare, in Hz (both included)."""
MAX_SAMPLE = 8.0
"""Largest sample magnitude accepted (+18 dB over full scale, room for a float file's overs); beyond it
the file holds no audio (a float sample of 3.4e38 overflows the encoders)."""
BLOCK_SAMPLES = 1 << 18
"""Samples (over all channels) decoded, checked and downmixed at a time."""
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


def _invalid(param: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"{param}: {why}", param=param, code="invalid_audio")


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


def check_layout(channels: int, rate: int, param: str) -> None:
    """400 for a channel count or sample rate outside what an upload may declare."""
    if not 1 <= channels <= MAX_CHANNELS:
        raise _invalid(param, f"{channels} channels (at most {MAX_CHANNELS} are accepted)")
    low, high = SOURCE_RATES
    if not low <= rate <= high:
        raise _invalid(param, f"a sample rate of {rate} Hz (from {low} to {high} Hz is accepted)")


class MonoTracks:
    """Blocks of decoded audio ``(frames, channels)`` -> float32 mono at each of ``rates``, block by block:
    each block checked (finite, within MAX_SAMPLE), averaged over its channels and fed to one streaming
    resampler per rate. Refuses a clip past ``max_s`` as soon as it gets there."""

    def __init__(self, source_rate: int, rates: Sequence[int], max_s: float, param: str) -> None:
        import soxr

        self.source_rate = source_rate
        self.param = param
        self.max_s = max_s
        self.max_frames = int(max_s * source_rate)
        self.frames = 0
        self._resamplers = {
            rate: soxr.ResampleStream(source_rate, rate, 1, dtype="float32", quality="HQ")
            for rate in rates
            if rate != source_rate
        }
        self._out: dict[int, list[np.ndarray]] = {rate: [] for rate in rates}

    def push(self, block: np.ndarray) -> None:
        """One block ``(frames, channels)`` of float32 samples (any memory layout)."""
        frames, channels = block.shape
        if channels > MAX_CHANNELS:
            raise _invalid(self.param, f"{channels} channels (at most {MAX_CHANNELS} are accepted)")
        self.frames += frames
        if self.frames > self.max_frames:
            raise _too_long(self.param, self.max_s)
        if not frames:
            return
        if not np.isfinite(block).all():
            raise _invalid(self.param, "the audio has NaN or infinite samples")
        if float(np.abs(block).max()) > MAX_SAMPLE:
            raise _invalid(self.param, f"sample values beyond {MAX_SAMPLE:g} times full scale are not audio")
        mono = block.mean(axis=1, dtype=np.float32) if channels > 1 else np.array(block[:, 0], np.float32)
        for rate, out in self._out.items():
            resampler = self._resamplers.get(rate)
            out.append(mono if resampler is None else resampler.resample_chunk(mono))

    def finish(self, min_s: float) -> dict[int, ReferenceAudio]:
        """The clip at every rate (400 when it is shorter than ``min_s``)."""
        if self.frames < min_s * self.source_rate:
            raise InvalidRequest(
                f"{self.param}: the audio is shorter than {min_s:g} s",
                param=self.param,
                code="audio_too_short",
            )
        clips = {}
        for rate, out in self._out.items():
            resampler = self._resamplers.get(rate)
            if resampler is not None:
                out.append(resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True))
            samples = np.ascontiguousarray(np.concatenate(out), dtype=np.float32)
            out.clear()
            clips[rate] = ReferenceAudio(samples, hashlib.sha256(samples.tobytes()).hexdigest(), rate)
        return clips


def _decode_soundfile(data: bytes, rates: Sequence[int], max_s: float, deadline: Deadline) -> MonoTracks:
    """The clip through libsndfile, block by block into one buffer; raises sf.LibsndfileError."""
    import soundfile as sf

    param = deadline.param
    with sf.SoundFile(io.BytesIO(data)) as handle:
        rate, channels = handle.samplerate, handle.channels
        check_layout(channels, rate, param)
        if handle.frames > max_s * rate + rate:  # the header's count (an estimate for mp3), 1 s slack
            raise _too_long(param, max_s)
        tracks = MonoTracks(rate, rates, max_s, param)
        buffer = np.empty((max(1, BLOCK_SAMPLES // channels), channels), dtype=np.float32)
        while True:
            block = handle.read(out=buffer)
            deadline.check()
            if not block.shape[0]:
                return tracks
            tracks.push(block)


def _decode_pyav(
    data: bytes, container: Container, rates: Sequence[int], max_s: float, deadline: Deadline
) -> MonoTracks:
    """The clip through FFmpeg restricted to ``container``'s demuxer and decoders, with no protocol
    allowed, frame by frame; raises av.FFmpegError or ValueError."""
    import av

    param = deadline.param
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
        declared = stream.codec_context
        if declared.channels or declared.sample_rate:  # what the header says, before any decoding
            check_layout(declared.channels or 1, declared.sample_rate or SOURCE_RATES[0], param)
        planar = av.AudioResampler(format="fltp")  # keeps layout and rate; float32 planes
        tracks: MonoTracks | None = None
        frames = container_.decode(stream)
        while True:
            frame = next(frames, None)  # None: the end, which flushes the converter
            deadline.check()
            if frame is not None:
                check_layout(frame.layout.nb_channels, frame.sample_rate, param)  # before converting it
                if tracks is not None and frame.sample_rate != tracks.source_rate:
                    raise _invalid(param, "the sample rate changes within the audio")
            for out in planar.resample(frame):
                if tracks is None:
                    tracks = MonoTracks(out.sample_rate, rates, max_s, param)
                tracks.push(out.to_ndarray().T)  # [channels, n] -> a [n, channels] view
            if frame is None:
                break
    if tracks is None:
        raise ValueError("no audio frames")
    return tracks


def decode_tracks(
    data: bytes, rates: Sequence[int], max_s: float, param: str, timeout_s: float
) -> MonoTracks:
    """Decode ``data`` to mono at each of ``rates`` within ``timeout_s`` seconds (see the module docstring).

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
            return _decode_soundfile(data, rates, max_s, deadline)
        except sf.LibsndfileError:
            deadline.check()
    try:
        return _decode_pyav(data, container, rates, max_s, deadline)
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


def load_references(
    data: bytes,
    *,
    min_s: float,
    max_s: float,
    param: str,
    rates: Sequence[int],
    timeout_s: float = DECODE_TIMEOUT_S,
) -> dict[int, ReferenceAudio]:
    """Uploaded bytes -> mono float32 at each of ``rates``, within [min_s, max_s] seconds, decoded once
    within ``timeout_s``. Raises InvalidRequest."""
    return decode_tracks(data, rates, max_s, param, timeout_s).finish(min_s)


def load_reference(
    data: bytes,
    *,
    min_s: float,
    max_s: float,
    param: str,
    timeout_s: float = DECODE_TIMEOUT_S,
    rate: int = REFERENCE_RATE,
) -> ReferenceAudio:
    """Uploaded bytes -> mono float32 at ``rate`` (``load_references`` for one rate)."""
    references = load_references(
        data, min_s=min_s, max_s=max_s, param=param, rates=(rate,), timeout_s=timeout_s
    )
    return references[rate]
