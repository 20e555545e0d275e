"""The post-codec chain of one response: loudness -> speaking rate -> fade-in -> encoder.

Each stage maps float32 mono PCM to float32 mono PCM with ``push``/``flush`` and its output does not
depend on how the input was chunked; the encoder turns the result into the response format's bytes.
The chain is plain numpy and is pushed from a worker thread, never on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from app.audio.fade import FadeIn
from app.audio.formats import AudioEncoder, make_encoder
from app.audio.loudness import LoudnessNormalizer
from app.audio.timestretch import TimeStretch
from app.core import defaults


class Stage(Protocol):
    """A streaming PCM stage: float32 [n] in, float32 [m] out."""

    def push(self, pcm: np.ndarray) -> np.ndarray: ...

    def flush(self) -> np.ndarray: ...


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


class PostChain:
    """Stages then the encoder; ``push`` returns the bytes ready to send (the header with the first)."""

    def __init__(self, options: PostOptions) -> None:
        stages: list[Stage] = []
        if options.normalize:
            stages.append(
                LoudnessNormalizer(
                    target_lufs=options.target_lufs,
                    max_gain_db=options.max_gain_db,
                    lock_s=options.lock_s,
                    min_estimate_s=options.min_estimate_s,
                )
            )
        if options.speaking_rate != 1.0:
            stages.append(TimeStretch(options.speaking_rate))
        if options.fade_in_ms > 0:
            stages.append(FadeIn(options.fade_in_ms))
        self.stages = stages
        self.encoder: AudioEncoder = make_encoder(options.response_format, options.stream)
        self._header: bytes | None = self.encoder.header()

    @property
    def media_type(self) -> str:
        return self.encoder.media_type

    def push(self, pcm: np.ndarray) -> bytes:
        """Run ``pcm`` (float32 [n]) through the stages and the encoder."""
        for stage in self.stages:
            pcm = stage.push(pcm)
        return self._with_header(self.encoder.push(pcm) if pcm.size else b"")

    def flush(self) -> bytes:
        """Drain every stage in order, then the encoder; the chain is finished afterwards."""
        data = b""
        for index, stage in enumerate(self.stages):
            tail = stage.flush()
            for later in self.stages[index + 1 :]:
                tail = later.push(tail)
            if tail.size:
                data += self.encoder.push(tail)
        return self._with_header(data + self.encoder.flush())

    def close(self) -> None:
        """Release the encoder (a client went away before the end)."""
        self.encoder.close()

    def _with_header(self, data: bytes) -> bytes:
        if self._header is None:
            return data
        header, self._header = self._header, None
        return header + data
