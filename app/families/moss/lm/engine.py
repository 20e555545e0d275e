"""The MOSS-TTS-Realtime frame engine on the shared batched row scheduler
(``app.families.shared.scheduler``): every active request advances together, one frame per step.

The scheduler admits (FIFO, ``max_batch`` rows, ``max_cached_rows`` cache positions: rows x padded
width, each row counted at its prefill plus ``max_frames``; beyond either a request waits, at most
``max_waiting`` wait and more are refused with 429), groups and prefills (``prefill_rows`` rows
together, ``prefill_chunk`` positions in all per chunk) and steps. This engine gives the model's part:
the prefill's last hidden state makes frame 0 (16 local sub-steps, batched), and each step is ONE
backbone forward over every row's new row ``[text, previous frame]`` (per-row positions, left-padded
cache), then 16 local sub-steps batched over the rows, each followed by the rows' sampling, batched
(``sampling.choose_codes``) but with every row's own parameters, seed and repetition history; rows that
sampled EOS on codebook 0 or reached ``max_frames`` leave. The rows stepping together keep their state
stacked (``Stacked``: settings, frames made, the counts) from step to step, rebuilt only when a row
joins or leaves, so a step's work beyond the forwards is a fixed number of batched operations, one host
read and one hand-over of every row's frame to the event loop (``post_all``).

**Prefill policy.** Requests admitted together are prefilled together, and a prefill chunk alternates
with a batch step. One at a time (``prefill_rows=1``, the former policy), the k-th of n simultaneous
requests waited for k prefills, k frame-0 passes and k - 1 batch steps, so the last one's first frame
came after all the others'. In one group every forward reads the weights once for all members and frame
0 is one batched local pass, so all members' first frames come together, after the group's cost. On a
compute-bound CPU that cost is close to the sum of the separate prefills, so grouping trades the median
first frame for the worst one (bench/moss_lm_bench.py, 8 requests: median 17.4 -> 22.8 s, max 34.7 ->
22.8 s, frames/s of the run 2.00 -> 2.64); on an accelerator a group of a few short prompts costs little
more than one, so it should lower both. We default to grouping because the worst wait is what a service
bounds, and the throughput of the run rises too. The chunk budget counts the rows of ALL members, so a
running stream still waits at most one ``prefill_chunk``-row forward between two of its frames, however
many join (tested).

The forwards (``MossTTSRealtime.backbone``, ``LocalTransformer.step``) contain no sampling and no host
synchronisation, so a CUDA/NPU graph could capture them later; sampling (``sampling.choose_codes``) runs
between them, on the device too: one host read per step (the frames, to post them and see EOS). A
request's frames depend only on its own job and seed, not on who shares its steps or its prefill (tested:
batched equals alone, float32). A failure in one row's sampling fails that row alone; a failure of a
shared forward (a group's prefill, the batch step) fails the rows of that forward.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from app.core.errors import InvalidRequest
from app.core.types import FinishReason
from app.families.moss.lm.loader import LoadedMoss
from app.families.moss.lm.local import LocalCache
from app.families.moss.lm.sampling import choose_codes, row_sampling
from app.families.moss.lm.types import AUDIO_EOS, CODEBOOKS, COLUMNS, FrameJob
from app.families.shared.handoff import Handoff, post_all
from app.families.shared.scheduler import BatchedEngine
from app.families.shared.stacking import Restack
from app.lm.sampling import BatchSampling, RowSampling


@dataclass(eq=False)
class FrameRow:
    """One request inside the loop: its rows, its text still to feed and its sampling state (while it
    steps in a batch, the batch's ``Stacked`` holds its up-to-date ``history``; written back when the
    batch changes)."""

    handoff: Handoff[np.ndarray]
    job: FrameJob
    prefill: torch.Tensor  # [1, T, 17]
    tail: list[int]  # text ids fed with steps 1, 2, ...
    history: torch.Tensor  # [max_frames, 16] frames made so far (repetition penalty, input)
    sampling: RowSampling
    length: int = 0  # rows in its cache (set once prefilled)
    frames: int = 0  # frames made (and posted)

    @property
    def reserved(self) -> int:
        """Backbone cache rows this request may need."""
        return int(self.job.prefill.shape[0]) + self.job.max_frames

    def text_at(self, index: int, pad: int) -> int | None:
        """The text id fed with step ``index + 1``: from the tail or the feed, ``pad`` once the text is all
        in, None while a streamed text has not reached it (the row parks)."""
        feed = self.job.feed
        if feed is None:
            return self.tail[index] if index < len(self.tail) else pad
        return feed.at(self.job.feed_from + index, pad)


class MossFrameEngine(BatchedEngine[FrameJob, FrameRow]):
    """Streams frames for ``FrameJob``s, many at once, on one loaded model (see the module docstring).

    ``max_cached_rows`` bounds the backbone KV cache: ``row_bytes()`` each (112 KiB per row in bfloat16
    at the released size, 224 KiB in float32), so the default 32768 rows is 3.7 GB in bfloat16.
    """

    def __init__(
        self,
        loaded: LoadedMoss,
        *,
        max_batch: int = 8,
        max_cached_rows: int = 32768,
        max_waiting: int = 32,
        prefill_chunk: int = 256,
        prefill_rows: int | None = None,
    ) -> None:
        model = loaded.model
        self._tensors = model.local_transformer.model.norm.weight.device  # where inputs are made
        super().__init__(
            "MOSS frame",
            loaded.device,
            max_rows=max_batch,
            cache_budget=max_cached_rows,
            prefill_chunk=prefill_chunk,
            prefill_rows=prefill_rows,
            max_waiting=max_waiting,
            tensors=self._tensors,
        )
        self.loaded = loaded
        self._local: LocalCache | None = None
        # the stacked state of the rows stepping (restacked when the batch changes)
        self.stacked: Restack[FrameRow, Stacked] = Restack(lambda rows: Stacked.of(rows, self._tensors))

    @property
    def max_batch(self) -> int:
        return self.max_rows

    @property
    def max_cached_rows(self) -> int:
        return self.cache_budget

    def row_bytes(self) -> int:
        """Bytes of backbone keys and values one cached row takes."""
        language = self.loaded.model.config.language
        head_dim = int(language.get("head_dim") or language["hidden_size"] // language["num_attention_heads"])
        kv_heads = int(language.get("num_key_value_heads") or language["num_attention_heads"])
        per_value = torch.empty((), dtype=self.loaded.dtype).element_size()
        return 2 * int(language["num_hidden_layers"]) * kv_heads * head_dim * per_value

    def ready(self) -> bool:
        """True while the thread runs and takes work."""
        return self.running()

    def details(self) -> dict[str, object]:
        """What runs where, for readiness and logs."""
        loaded = self.loaded
        chosen = loaded.precision.reason if loaded.precision is not None else "the dtype the caller chose"
        return {
            "device": str(loaded.device),
            "dtype": str(loaded.dtype).removeprefix("torch."),
            "attention": loaded.attention,
            "max_batch": self.max_batch,
            "prefill_rows": self.prefill_rows,
            "max_cached_rows": self.max_cached_rows,
            "cache_bytes": self.max_cached_rows * self.row_bytes(),
            "why": chosen,
        }

    async def stream(self, job: FrameJob, *, admitted: bool = False) -> AsyncGenerator[np.ndarray, None]:
        """Frames (n, 16) int64 as they are made; ends at EOS or ``job.max_frames``. Closing the generator
        removes the row within one step; this row's failure raises here. ``admitted``: a later part of a
        response already admitted, which waits its turn rather than being refused."""
        self._check(job)
        handoff: Handoff[np.ndarray] = Handoff(asyncio.get_running_loop())
        if job.feed is not None:
            job.feed.bind(self.wake)
        self.submit(job, handoff, admitted)
        try:
            while True:
                frames = await handoff.next_items()
                if frames:
                    yield np.concatenate(frames)
                ended = handoff.ended
                if ended is not None:
                    if ended.error is not None:
                        raise ended.error
                    return
        finally:
            await handoff.close()

    # --- the model's part (the thread) ----------------------------------------------------------------

    def setup(self) -> None:
        self._local = self.loaded.model.local_transformer.new_cache(self.max_batch)

    def prepare(self, job: FrameJob, handoff: Handoff[Any]) -> FrameRow:
        device = self._tensors
        prefill = torch.from_numpy(np.ascontiguousarray(job.prefill, dtype=np.int64)).to(device)[None]
        history = torch.zeros((job.max_frames, CODEBOOKS), dtype=torch.long, device=device)
        return FrameRow(handoff, job, prefill, list(job.text_tail), history, row_sampling(job.sampling))

    def prompt(self, row: FrameRow) -> torch.Tensor:
        return row.prefill

    def can_step(self, row: FrameRow) -> bool:
        """False while a streamed text has not brought the id the row's next step needs (it parks)."""
        ready = row.text_at(row.frames - 1, self.loaded.ids.text_pad) is not None
        if row.job.feed is not None:
            row.job.feed.waiting(not ready)
        return ready

    def forward(
        self,
        rows: list[FrameRow],
        inputs: torch.Tensor,
        mask: torch.Tensor | None,
        positions: torch.Tensor | None,
        cache: Any,
    ) -> tuple[torch.Tensor, Any]:
        """The backbone's last hidden state of each row ``[B, H]`` and the cache."""
        hidden, cache = self.loaded.model.backbone(inputs, cache, mask, positions)
        return hidden, cache

    def step_inputs(self, rows: list[FrameRow]) -> torch.Tensor:
        """Each row's next backbone row ``[B, 1, 17]``: the text id beside the frame fed now (text pad once
        the text is all in) and that frame."""
        text_pad = self.loaded.ids.text_pad
        texts = []
        for row in rows:
            beside = row.text_at(row.frames - 1, text_pad)  # the text id beside the frame fed now
            assert beside is not None  # a row whose text has not come is parked, not stepped
            texts.append(beside)
        state = self.stacked(rows)
        audio = state.history[state.arange, state.frames - 1]
        text = torch.tensor(texts, dtype=torch.long, device=self._tensors)
        return torch.cat([text[:, None], audio], dim=1)[:, None]

    def sample(self, rows: list[FrameRow], out: torch.Tensor) -> list[FrameRow]:
        """Each row's next frame from its backbone state, delivered; the rows that left."""
        state = self.stacked(rows)
        codes, failed = self._frame(out, state)
        length = state.frames + 1 >= state.max_frames
        ending = torch.where(failed, 3, torch.where(codes[:, 0] == AUDIO_EOS, 1, torch.where(length, 2, 0)))
        host = torch.cat([codes, ending[:, None]], dim=1).cpu().numpy()  # the step's one host read
        index = state.frames[:, None, None].expand(-1, 1, CODEBOOKS)
        state.history.scatter_(1, index, codes[:, None])
        state.frames += 1
        endings = host[:, CODEBOOKS].tolist()
        going = [i for i, end in enumerate(endings) if end in (0, 2)]
        for i in going:
            rows[i].frames += 1
        post_all([state.handoffs[i] for i in going], [host[i, None, :CODEBOOKS] for i in going])
        gone = []
        for i, end in enumerate(endings):
            if end:
                error = self.failure(ValueError("the logits are not finite")) if end == 3 else None
                self.finish(rows[i], ENDINGS[end - 1], error)
                gone.append(rows[i])
        return gone

    def _check(self, job: FrameJob) -> None:
        """Refuse, before anything runs, a job this engine can never serve."""
        rows = int(job.prefill.shape[0])
        if job.prefill.ndim != 2 or job.prefill.shape[1] != COLUMNS or rows == 0:
            raise InvalidRequest(f"a MOSS job's prefill must be (T, {COLUMNS}) rows")
        if job.max_frames < 1:
            raise InvalidRequest("max_tokens must be at least 1", param="max_tokens")
        sampling = job.sampling
        if sampling.temperature < 0 or not 0 < sampling.top_p <= 1 or sampling.repetition_penalty <= 0:
            raise InvalidRequest("temperature must be >= 0, top_p in (0, 1] and repetition_penalty > 0")
        if sampling.repetition_window < 0:
            raise InvalidRequest("repetition_window must be >= 0")
        needed = rows + job.max_frames
        if needed > self.loaded.max_positions:
            raise InvalidRequest(
                f"the prompt ({rows} rows) plus max_tokens ({job.max_frames}) exceeds the model's "
                f"{self.loaded.max_positions} positions",
                param="max_tokens",
            )
        if needed > self.max_cached_rows:
            raise InvalidRequest(
                f"the prompt ({rows} rows) plus max_tokens ({job.max_frames}) exceeds this server's "
                f"cache budget of {self.max_cached_rows} rows",
                param="max_tokens",
            )

    def _frame(self, hidden: torch.Tensor, state: Stacked) -> tuple[torch.Tensor, torch.Tensor]:
        """The next frame of each row from its backbone state ``hidden`` [B, H]: 16 local forwards over
        the rows, each followed by the rows' sampling in one batched call (``choose_codes``: each row its
        own settings, repetition window and seed). Returns the frames [B, 16] on the device and the rows
        that could not sample (their codes are placeholders)."""
        local = self.loaded.model.local_transformer
        assert self._local is not None
        recent = state.recent()
        codes = torch.zeros((len(state.rows), CODEBOOKS), dtype=torch.long, device=hidden.device)
        failed = torch.zeros(len(state.rows), dtype=torch.bool, device=hidden.device)
        x = hidden
        for head in range(CODEBOOKS):
            if head:
                x = local.embed(head, codes[:, head - 1])
            logits = local.step(head, x, self._local)
            codes[:, head], bad = choose_codes(logits, head, recent[:, :, head], state.settings, state.frames)
            failed |= bad
        return codes, failed


ENDINGS: tuple[FinishReason, ...] = ("stop", "length", "error")  # a row's ending 1, 2, 3 in ``sample``


@dataclass(eq=False)
class Stacked:
    """The sampling state of the rows stepping together, ``[B, ...]`` in their order."""

    rows: list[FrameRow]
    handoffs: list[Handoff[np.ndarray]]
    settings: BatchSampling
    history: torch.Tensor  # [B, F, 16] frames made so far
    frames: torch.Tensor  # [B] frames made
    max_frames: torch.Tensor  # [B]
    window: torch.Tensor  # [B] repetition window
    widest: int  # the largest window
    arange: torch.Tensor  # [B] 0..B-1

    @classmethod
    def of(cls, rows: list[FrameRow], device: torch.device) -> Stacked:
        def column(values: list[int]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.long, device=device)

        windows = [max(row.job.sampling.repetition_window, 0) for row in rows]
        return cls(
            list(rows),
            [row.handoff for row in rows],
            BatchSampling.of([row.sampling for row in rows], device),
            pad_sequence([row.history for row in rows], batch_first=True),
            column([row.frames for row in rows]),
            column([row.job.max_frames for row in rows]),
            column(windows),
            max(windows),
            torch.arange(len(rows), device=device),
        )

    def write_back(self) -> None:
        """Each row's frames back into the row (a view of the stack's)."""
        for i, row in enumerate(self.rows):
            row.history = self.history[i, : row.history.shape[0]]

    def recent(self) -> torch.Tensor:
        """Each row's last ``repetition_window`` frames of this turn, right-aligned and padded with -1:
        [B, W, 16] with W the largest window."""
        rows, width = len(self.rows), self.widest
        column = torch.arange(width, device=self.frames.device)
        at = self.frames[:, None] - width + column  # [B, W] the frame each column holds
        valid = (at >= 0) & (column >= width - self.window[:, None])
        index = at.clamp(min=0)[:, :, None].expand(rows, width, CODEBOOKS)
        return self.history.gather(1, index).masked_fill(~valid[:, :, None], -1)
