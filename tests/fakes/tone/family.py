"""The tone family: speaks a sine tone, in chunks, through the family seam.

It has no reference voices and no multi-turn context, so requests that need either must be refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncGenerator, Mapping, Sequence

import numpy as np

from app.core.errors import InvalidRequest
from app.core.family import Capabilities, ContextWindow, ReferenceFormat, Sampling, SpeechJob, StreamJob
from app.core.stats import UtteranceStats
from app.core.voices import VoiceCatalog
from app.families.shared.segmented import SegmentedStream
from app.interleave.service import Interleave
from app.observability.metrics import Metrics
from tests.fakes.tone.settings import ToneSettings

RATE = 24_000
CHUNK = 1920  # 80 ms, a MOSS frame
MODEL = "tone-tts"


class ToneUtterance:
    """``frames`` chunks of a 220 Hz (voice "low") or 440 Hz ("high") sine; closing stops it."""

    def __init__(self, job: SpeechJob, frames: int, hz: float, frame_delay_s: float = 0.0) -> None:
        self.job = job
        self.frames = frames
        self.hz = hz
        self.frame_delay_s = frame_delay_s
        self.closed_early = False

    def headers(self) -> Mapping[str, str]:
        return {"X-Tone-Hz": str(self.hz)}

    async def stream(self, stats: UtteranceStats) -> AsyncGenerator[np.ndarray, None]:
        stats.prompt_tokens = len(self.job.text.split())
        made = 0
        try:
            for frame in range(self.frames):
                await asyncio.sleep(self.frame_delay_s)
                t = (np.arange(CHUNK) + frame * CHUNK) / RATE
                chunk = (0.1 * np.sin(2 * np.pi * self.hz * t)).astype(np.float32)
                stats.codes += 1
                stats.tokens.append(frame)
                stats.samples += chunk.size
                made += 1
                yield chunk
            stats.finish_reason = "stop"
        finally:  # closed (GeneratorExit) or cancelled (CancelledError) before its last frame
            if made < self.frames:
                self.closed_early = True
                stats.finish_reason = "cancelled"


class ToneFamily:
    """The fake family: one model id, two voices, no capabilities beyond speaking text."""

    name = "tone"
    capabilities = Capabilities()
    reference = ReferenceFormat()

    def __init__(self, settings: ToneSettings, interleave: Interleave, metrics: Metrics) -> None:
        self.voices = VoiceCatalog(("low", "high"), "low", {"deep": "low"})
        self.defaults = Sampling(max_tokens=settings.TONE_MAX_FRAMES, temperature=1.0, repetition_penalty=1.0)
        self.frames_per_word = settings.TONE_FRAMES_PER_WORD
        self.frame_delay_s = settings.TONE_FRAME_DELAY_S  # pacing of each 80 ms frame (0: as fast as it can)
        self.started = False
        self.closed = False
        self.jobs: list[SpeechJob] = []
        self.utterances: list[ToneUtterance] = []

    def model_ids(self) -> Sequence[str]:
        return (MODEL,)

    async def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.closed = True

    async def ready(self) -> dict[str, bool]:
        return {"tone": self.started}

    def details(self) -> dict[str, object]:
        return {"waveform": "sine"}

    def context_window(self) -> ContextWindow:
        return ContextWindow(positions=1000, min_generation=1)

    async def plan(self, job: SpeechJob) -> ToneUtterance:
        if "forbidden" in job.text:
            raise InvalidRequest("this family will not say that", param="input")
        self.jobs.append(job)
        frames = min(job.sampling.max_tokens, self.frames_per_word * len(job.text.split()))
        utterance = ToneUtterance(job, frames, 220.0 if job.voice == "low" else 440.0, self.frame_delay_s)
        self.utterances.append(utterance)
        return utterance

    async def open_stream(self, job: StreamJob) -> SegmentedStream:
        """A realtime turn: each segment planned as a text of its own (the shared segmented stream)."""
        base = SpeechJob(model=job.model, text="", voice=job.voice, sampling=job.sampling)

        async def plan(text: str, index: int) -> ToneUtterance:
            return await self.plan(dataclasses.replace(base, text=text))

        return SegmentedStream(plan, crossfade=0)

    def check_can_encode(self) -> None:
        raise InvalidRequest("the tone family has no reference voices", code="vc_unsupported")

    async def encode_reference(self, samples: np.ndarray, digest: str) -> list[int]:
        raise InvalidRequest("the tone family has no reference voices", code="vc_unsupported")
