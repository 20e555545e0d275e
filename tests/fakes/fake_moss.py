"""Stand-ins for the MOSS LM stage (``app.families.moss.lm``), with the contract's interfaces: a prompter
whose
rows are easy to count and a frame engine that yields deterministic frames.

``FakePrompter.job`` lays out ``SYSTEM_ROWS`` rows, one per reference frame, one per history text id and
frame, and one per text id (the text is also the job's ``text_tail``), so a test knows how many rows a
prompt takes. ``FakeFrameEngine.stream`` yields ``FRAMES_PER_ID`` frames per text id of the job (at most
``max_frames``) in blocks of ``block``, with codes drawn from the job's seed (0 when None), and keeps
count of the rows open.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field

import numpy as np

from app.core.errors import Unavailable
from app.families.moss.lm.stage import MossLM
from app.families.moss.lm.types import FrameJob, FrameSampling, Turn

SYSTEM_ROWS = 10
FRAMES_PER_ID = 2


@dataclass
class PromptCall:
    text: str
    reference: np.ndarray | None
    history: list[Turn]
    sampling: FrameSampling
    max_frames: int


class FakePrompter:
    """Rows: system, one per reference frame, per history text id and frame, per text id (one per word)."""

    def __init__(self) -> None:
        self.calls: list[PromptCall] = []

    def text_ids(self, text: str) -> tuple[int, ...]:
        return tuple(100 + len(word) for word in text.split())

    def job(
        self,
        text: str,
        *,
        reference: np.ndarray | None,
        history: Sequence[Turn] = (),
        sampling: FrameSampling = FrameSampling(),  # noqa: B008 (frozen: one shared default is fine)
        max_frames: int,
    ) -> FrameJob:
        self.calls.append(PromptCall(text, reference, list(history), sampling, max_frames))
        rows = SYSTEM_ROWS + (0 if reference is None else len(reference))
        rows += sum(len(turn.text_ids) + len(turn.frames) for turn in history)
        ids = self.text_ids(text)
        prefill = np.zeros((rows + len(ids), 17), dtype=np.int64)
        return FrameJob(prefill, ids, sampling, max_frames)


@dataclass
class FakeFrameEngine:
    """Deterministic frames per job; ``delay_s`` between blocks; ``fail_after`` frames raises."""

    block: int = 1
    delay_s: float = 0.0
    full: bool = False  # refuse new requests' rows with a 503 (a later part of one is taken)
    frames: int | None = None  # frames per job when set (else FRAMES_PER_ID per text_tail id)
    started: bool = False
    closed: bool = False
    open_rows: int = 0
    finished_rows: int = 0
    jobs: list[FrameJob] = field(default_factory=list)

    def start(self) -> None:
        self.started = True

    async def close(self) -> None:
        self.closed = True

    def ready(self) -> bool:
        return self.started and not self.closed

    def details(self) -> dict[str, object]:
        return {"engine": "fake", "max_batch": 8}

    def frames_for(self, job: FrameJob) -> np.ndarray:
        """Every frame ``stream(job)`` yields, ``(F, 16)``."""
        wanted = FRAMES_PER_ID * len(job.text_tail) if self.frames is None else self.frames
        count = min(job.max_frames, wanted)
        rng = np.random.default_rng(job.sampling.seed or 0)
        return rng.integers(0, 1024, size=(count, 16), dtype=np.int64)

    async def stream(self, job: FrameJob, *, admitted: bool = False) -> AsyncGenerator[np.ndarray, None]:
        if self.full and not admitted:
            raise Unavailable("every row is busy", code="engine_full")
        self.jobs.append(job)
        frames = self.frames_for(job)
        self.open_rows += 1
        try:
            for start in range(0, len(frames), self.block):
                await asyncio.sleep(self.delay_s)
                yield frames[start : start + self.block]
        finally:
            self.open_rows -= 1
            self.finished_rows += 1


def fake_lm(engine: FakeFrameEngine, prompter: FakePrompter, max_positions: int = 4096) -> MossLM:
    """The LM stage made of the fakes."""
    return MossLM(prompter, engine, max_positions)
