"""The post-codec chain of one response: loudness -> speaking rate -> fade-in -> encoder.

Each stage maps float32 mono PCM to float32 mono PCM with ``push``/``flush`` and its output does not
depend on how the input was chunked; the encoder turns the result into the response format's bytes.
The chain is plain numpy and is pushed from a worker thread, never on the event loop.

**Boundaries** (SSML breaks and rate changes): a response may be several segments of speech, each
generated on its own, with a ``Boundary`` pushed between them. At a boundary the speaking-rate stage
is flushed (the segment before it ends whole: ``round(n / rate)`` samples), ``silence`` samples of
digital zeros go straight to the encoder, and the segment after it is stretched by a fresh stage at
its own rate (the request's rate times the boundary's ``rate``, kept in [0.5, 2.0]). The silence is
inserted after the speed change, so a 700 ms break is 700 ms of output at any speed. The loudness
stage never sees the silence: it measures and scales the speech alone, exactly as if the segments
were one stream, and since it emits every sample it takes (delayed, never added or dropped), a
boundary is held back until the loudness stage has emitted the samples before it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.audio.fade import FadeIn
from app.audio.formats import AudioEncoder, make_encoder
from app.audio.loudness import LoudnessNormalizer
from app.audio.timestretch import MAX_RATE, MIN_RATE, TimeStretch
from app.core import defaults
from app.core.constants import SAMPLE_RATE


class Stage(Protocol):
    """A streaming PCM stage: float32 [n] in, float32 [m] out."""

    def push(self, pcm: np.ndarray) -> np.ndarray: ...

    def flush(self) -> np.ndarray: ...


@dataclass(frozen=True)
class Boundary:
    """Between two segments of speech: ``silence`` samples of zeros in the output, and the speaking rate
    of the next segment as a multiple of the request's (``rate``)."""

    silence: int = 0
    rate: float = 1.0


Chunk = np.ndarray | Boundary
"""What a response's audio stream carries: float32 PCM [N], or a boundary between segments."""


@dataclass(frozen=True)
class PostOptions:
    """Per-response choices and the settings they come with."""

    response_format: str
    stream: bool
    speaking_rate: float = 1.0
    normalize: bool = True
    target_lufs: float = defaults.TARGET_LOUDNESS_LUFS
    max_gain_db: float = defaults.MAX_GAIN_DB
    lock_s: float = defaults.NORM_LOCK_S
    min_estimate_s: float = defaults.NORM_MIN_ESTIMATE_S
    fade_in_ms: float = defaults.FADE_IN_MS
    sample_rate: int = SAMPLE_RATE
    """The output's rate: 24 kHz, or any rate for a raw encoding (resampled after every stage)."""


def _stretch(rate: float) -> TimeStretch | None:
    """The speaking-rate stage for ``rate`` (kept in the stage's range); None at 1.0 (a bypass)."""
    rate = min(max(rate, MIN_RATE), MAX_RATE)
    return None if rate == 1.0 else TimeStretch(rate)


class PostChain:
    """Stages then the encoder; ``push`` returns the bytes ready to send (the header with the first)."""

    def __init__(self, options: PostOptions) -> None:
        self.loudness: LoudnessNormalizer | None = None
        if options.normalize:
            self.loudness = LoudnessNormalizer(
                target_lufs=options.target_lufs,
                max_gain_db=options.max_gain_db,
                lock_s=options.lock_s,
                min_estimate_s=options.min_estimate_s,
            )
        self.rate = options.speaking_rate
        self.stretch = _stretch(self.rate)
        self.fade = FadeIn(options.fade_in_ms) if options.fade_in_ms > 0 else None
        self.encoder: AudioEncoder = make_encoder(
            options.response_format, options.stream, options.sample_rate
        )
        self._header: bytes | None = self.encoder.header()
        self._taken = 0  # samples pushed into the loudness stage
        self._leveled = 0  # samples it has emitted
        self._pending: deque[tuple[int, Boundary]] = deque()  # boundaries at an input position

    @property
    def media_type(self) -> str:
        return self.encoder.media_type

    def push(self, chunk: Chunk) -> bytes:
        """Run PCM (float32 [n]) through the stages and the encoder, or mark a boundary."""
        if isinstance(chunk, Boundary):
            self._pending.append((self._taken, chunk))
            return self._with_header(self._leveled_out(np.zeros(0, dtype=np.float32)))
        self._taken += chunk.size
        pcm = self.loudness.push(chunk) if self.loudness is not None else chunk
        return self._with_header(self._leveled_out(pcm))

    def flush(self) -> bytes:
        """Drain every stage in order, then the encoder; the chain is finished afterwards."""
        tail = self.loudness.flush() if self.loudness is not None else np.zeros(0, dtype=np.float32)
        data = self._leveled_out(tail) + self._end_segment()
        if self.fade is not None and (rest := self.fade.flush()).size:
            data += self.encoder.push(rest)
        return self._with_header(data + self.encoder.flush())

    def close(self) -> None:
        """Release the encoder (a client went away before the end)."""
        self.encoder.close()

    def _leveled_out(self, pcm: np.ndarray) -> bytes:
        """Leveled samples on to the rate stage, with each boundary that falls among them applied."""
        data = b""
        while self._pending and self._pending[0][0] <= self._leveled + pcm.size:
            position, boundary = self._pending.popleft()
            cut = position - self._leveled
            data += self._rated(pcm[:cut]) + self._end_segment()
            self._leveled, pcm = position, pcm[cut:]
            if boundary.silence:
                data += self.encoder.push(np.zeros(boundary.silence, dtype=np.float32))
            self.stretch = _stretch(self.rate * boundary.rate)
        self._leveled += pcm.size
        return data + self._rated(pcm)

    def _rated(self, pcm: np.ndarray) -> bytes:
        if self.stretch is not None:
            pcm = self.stretch.push(pcm)
        return self._faded(pcm)

    def _end_segment(self) -> bytes:
        """The rate stage's tail: the segment so far ends whole."""
        return self._faded(self.stretch.flush()) if self.stretch is not None else b""

    def _faded(self, pcm: np.ndarray) -> bytes:
        if not pcm.size:
            return b""
        if self.fade is not None:
            pcm = self.fade.push(pcm)
        return self.encoder.push(pcm)

    def _with_header(self, data: bytes) -> bytes:
        if self._header is None:
            return data
        header, self._header = self._header, None
        return header + data
