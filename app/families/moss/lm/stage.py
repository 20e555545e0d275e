"""The family's view of the LM stage (``app.families.moss.lm``): a prompter that builds jobs, a frame engine
that streams frames, the backbone window and the weights' precision; ``load_lm`` builds the real ones
(imported only then).

The protocols name exactly what the family uses, so tests drive the family with a stand-in engine and
prompter and the real ones are built only when the family starts.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from app.families.moss.lm.feed import TextFeed
from app.families.moss.lm.types import FrameJob, FrameSampling, Precision, Turn
from app.families.moss.settings import MossSettings


class Prompter(Protocol):
    """Builds a generation's rows (``app.families.moss.lm.prompt.MossPrompter``)."""

    def job(
        self,
        text: str,
        *,
        reference: np.ndarray | None,
        history: Sequence[Turn] = (),
        sampling: FrameSampling = ...,
        max_frames: int,
    ) -> FrameJob:
        """The job that speaks ``text`` (after ``history``) in the voice of ``reference`` codes (F, 16)."""
        ...

    def text_ids(self, text: str) -> tuple[int, ...]:
        """The text ids a history ``Turn`` holds for ``text``."""
        ...

    @property
    def tokenizer(self) -> Any:
        """The tokenizer behind ``text_ids`` (its pre-tokenizer tells where a streamed text may be cut)."""
        ...

    def ids_job(
        self,
        ids: Sequence[int],
        *,
        reference: np.ndarray | None,
        history: Sequence[Turn] = (),
        sampling: FrameSampling = ...,
        max_frames: int,
        feed: TextFeed | None = None,
    ) -> FrameJob:
        """The job for text ids (with a ``feed``: a streamed text, ``ids`` those arrived so far)."""
        ...


class FrameEngine(Protocol):
    """Generates frames for many jobs at once (``app.families.moss.lm.engine.MossFrameEngine``)."""

    def start(self) -> None: ...

    async def close(self) -> None: ...

    def stream(self, job: FrameJob, *, admitted: bool = False) -> AsyncGenerator[np.ndarray, None]:
        """int64 frames ``(n, 16)``, n >= 1, as they are made; at most ``job.max_frames`` in all; closing
        it removes the job from the batch. Only a new request (not ``admitted``: a long input's later
        part is) may be refused for a full engine."""
        ...

    def ready(self) -> bool: ...

    def details(self) -> dict[str, object]: ...


@dataclass
class MossLM:
    """What the family needs of the LM stage."""

    prompter: Prompter
    engine: FrameEngine
    max_positions: int
    """Rows one job may take, its prefill plus its frames: the backbone window, or the engine's cache
    budget when that is smaller."""
    precision: Precision | None = None
    """The weights' dtype and why (``loader.choose_precision``); None for a stand-in LM."""
    prepacked: bool = False
    """Whether its linear weights are laid out once for the CPU (MOSS_PREPACK)."""


def load_lm(settings: MossSettings, device: str) -> MossLM:
    """Load MOSS_TTS_MODEL on ``device`` and build its prompter and (not yet started) frame engine.

    Blocking (reads the checkpoint): run it in a worker thread. Raises ``ModelSourceError`` for a bad
    source.
    """
    from app.codec.prepack import prepack_for_cpu
    from app.families.moss.lm.engine import MossFrameEngine
    from app.families.moss.lm.loader import load_moss_lm
    from app.families.moss.lm.prompt import MossPrompter

    loaded = load_moss_lm(
        settings.MOSS_TTS_MODEL,
        device=device,
        dtype=settings.MOSS_LM_DTYPE,
        attention=settings.MOSS_LM_ATTENTION,
    )
    prepacked = False
    if settings.MOSS_PREPACK and loaded.device.type == "cpu":  # the same logits, bf16 or float32
        prepacked = prepack_for_cpu(loaded.model, "MOSS LM").packed > 0
    engine = MossFrameEngine(
        loaded,
        max_batch=settings.MOSS_MAX_BATCH,
        max_cached_rows=settings.MOSS_CACHE_POSITIONS,
        prefill_chunk=settings.MOSS_PREFILL_CHUNK,
        prefill_rows=settings.MOSS_PREFILL_ROWS or None,
    )
    window = min(loaded.max_positions, settings.MOSS_CACHE_POSITIONS)
    return MossLM(MossPrompter(loaded.tokenizer, loaded.ids), engine, window, loaded.precision, prepacked)
