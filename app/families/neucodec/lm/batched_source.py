"""The embedded LM backend serving many generations at once: one thread, one batched decode step.

``BatchedTokenSource`` is ``TransformersTokenSource`` (same loading, id maps, streams, start and close)
with another generation thread. The thread owns the model and loops:

1. take new requests off the queue into a FIFO wait list;
2. admit the head of the wait list while the batch has a free row (``batch_size``) and the KV-cache
   budget (``cache_tokens``) holds; beyond either a request waits, it never allocates past the budget;
3. drop the rows whose stream was closed (a cancelled request leaves within one step);
4. run one prefill chunk of the prefill group: up to ``prefill_rows`` (default ``batch_size``) admitted
   requests prefilled TOGETHER, their prompts left-padded to the longest (``PrefillGroup``: padding
   masked, each row at its own positions, never more than half of the group's columns padding), in
   chunks of ``prefill_chunk`` prompt tokens over all members, so a long prompt never stalls the running
   rows for more than one chunk; after its last chunk every member samples its first code and the
   group joins the batch; requests admitted meanwhile form the next group (FIFO: none is overtaken);
5. run one decode step over every row and sample each row's next code with its own temperature, top-k,
   top-p, repetition penalty and seeded ``torch.Generator`` (``choose_next``, the same function as the
   one-at-a-time engine), over the speech and stop ids only; finished rows leave.

**The cache is one padded batch** (``app.lm.padded_cache``): row ``i`` holds its ``n_i`` tokens
right-aligned, left padding masked out by the attention mask, at its own position ids. We chose this
over per-row ``DynamicCache`` objects merged each step because merging copies every row's whole cache on
every step, while the padded batch copies only when a row joins or leaves, and transformers' SDPA path
already handles a 2-D padding mask with per-row position ids.

**Grouped prefill.** One at a time (``prefill_rows=1``), the k-th of n simultaneous requests waited for
k prefills and k - 1 decode steps, and the decode batch filled up one row per prefill; in a group each
forward reads the weights once for all members, so on a GPU (and on a CPU with bf16 matrix units) a
group of short prompts costs little more than one, and all members start decoding together.

**Why a hand-written loop**: transformers' own continuous batching (``generate_batch`` /
``ContinuousBatchingManager``, 5.x) samples with one ``GenerationConfig`` for the whole batch, so it has
no per-request repetition penalty, and seeds through the process-wide RNG (``set_seed``), a side effect on
every other user of torch's global generator and no per-request reproducibility. Here a request's codes
depend only on its own prompt, parameters and seed, not on who shares its steps (tested: batched equals
alone).

A failure in one request's tokenization or sampling fails that request alone; a failure of a shared
forward (a group's prefill chunk, the decode step; e.g. the device runs out of memory despite the budget)
fails the rows of that forward.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import torch

from app.core.device import set_current
from app.core.errors import APIError, BackendError, Unavailable
from app.families.neucodec.lm.transformers_source import (
    TransformersTokenSource,
    _End,
    _Job,
    _LoadedLM,
    choose_next,
)
from app.families.neucodec.speech_tokens import SPEECH_CODES
from app.families.shared.job_queue import take_queued
from app.lm.padded_cache import PaddedBatch, PrefillGroup


@dataclass(eq=False)
class _Row:
    """One request inside the loop: its prompt and its sampling state."""

    job: _Job
    prompt: torch.Tensor  # [1, P] LM ids
    seen: torch.Tensor  # [A] bool over the allowed ids: repetition-penalty history
    generator: torch.Generator | None
    length: int = 0  # tokens in its cache (prompt + codes fed back), set once prefilled
    generated: int = 0
    last: int = 0  # LM id of the code chosen last: the next step's input

    @property
    def reserved(self) -> int:
        """Cache columns this row may need: its whole prompt plus every code it may generate."""
        return int(self.prompt.shape[1]) + self.job.params.max_tokens


class _Batch(PaddedBatch[_Row]):
    """The rows in the batched decode and their shared padded cache (``width`` columns)."""


class _Group(PrefillGroup[_Row]):
    """Requests prefilled together (``inputs`` [G, L] LM ids)."""


class BatchedTokenSource(TransformersTokenSource):
    """A ``TokenSource`` running the LM in-process, with every active generation in one decode batch.

    ``batch_size`` is the most generations decoded together; ``prefill_rows`` the most prompts prefilled
    together (None: ``batch_size``); ``prefill_chunk`` the most prompt tokens (over all of them) run in
    one forward between two decode steps; ``cache_tokens`` bounds the padded KV cache (rows ×
    columns, each row counted at its prompt plus ``max_tokens``): a request that would exceed it waits
    for rows to finish (a request larger than the whole budget runs when it would be alone).
    """

    def __init__(
        self,
        model: str,
        device: str,
        dtype: str = "auto",
        name: str = "transformers",
        attention_fp32: bool = False,
        *,
        batch_size: int = 8,
        prefill_chunk: int = 256,
        prefill_rows: int | None = None,
        cache_tokens: int = 32768,
    ) -> None:
        super().__init__(model, device, dtype=dtype, name=name, attention_fp32=attention_fp32)
        prefill_rows = batch_size if prefill_rows is None else prefill_rows
        if min(batch_size, prefill_chunk, prefill_rows, cache_tokens) < 1:
            raise ValueError("batch_size, prefill_chunk, prefill_rows and cache_tokens must be positive")
        self.batch_size = batch_size
        self.prefill_chunk = prefill_chunk
        self.prefill_rows = prefill_rows
        self.cache_tokens = cache_tokens
        self.peak_rows = 0  # most rows decoded together so far (tests, bench)
        self.peak_group = 0  # most prompts prefilled together so far

    # --- the generation thread -----------------------------------------------------------------------

    def _serve(self) -> None:
        """The generation thread: admit, prefill and decode until the ``None`` sentinel or closing."""
        lm = self._lm
        assert lm is not None
        set_current(lm.device)
        waiting: deque[_Job | _Row] = deque()  # the head becomes a _Row once tokenized
        admitted: deque[_Row] = deque()  # admitted, waiting for the next prefill group
        group = _Group()  # prefilling now
        batch = _Batch()
        with torch.inference_mode():
            while True:
                idle = not (waiting or admitted or group.rows or batch.rows)
                if not take_queued(self._jobs, waiting.append, block=idle) or self._closing.is_set():
                    break
                self._admit(lm, waiting, [*admitted, *group.rows, *batch.rows], admitted)
                self._drop_cancelled(admitted, group, batch)
                if not group.rows and admitted:
                    group.form(admitted, self.prefill_rows, _prompt)
                    self.peak_group = max(self.peak_group, len(group.rows))
                if group.rows:
                    self._prefill_step(lm, group, batch)
                if batch.rows:
                    self._decode_step(lm, batch)
        closed = Unavailable(f"LM source {self.name!r} is shutting down")
        for item in [*waiting, *admitted, *group.rows, *batch.rows]:
            _finish(item.job if isinstance(item, _Row) else item, _End("error", closed))

    def _admit(
        self, lm: _LoadedLM, waiting: deque[_Job | _Row], active: list[_Row], admitted: deque[_Row]
    ) -> None:
        """Admit waiting jobs in arrival order while a row and the cache budget are free (``active``:
        the rows admitted so far, prefilling or decoding)."""
        while waiting:
            head = waiting[0]
            job = head.job if isinstance(head, _Row) else head
            if job.cancel.is_set():
                waiting.popleft()  # closed before it started: its stream is already over
                continue
            if len(active) >= self.batch_size:
                return
            try:
                row = head if isinstance(head, _Row) else _new_row(lm, job)
            except Exception as exc:
                waiting.popleft()
                _finish(job, _failure(exc))
                continue
            waiting[0] = row  # tokenized once, however long it waits
            widest = max([row.reserved, *(other.reserved for other in active)])
            if active and (len(active) + 1) * widest > self.cache_tokens:
                return  # waits for rows to leave
            waiting.popleft()
            job.started.set()
            admitted.append(row)
            active.append(row)

    def _drop_cancelled(self, admitted: deque[_Row], group: _Group, batch: _Batch) -> None:
        """Finish the rows whose stream was closed; they leave before the next forward."""
        for row in [row for row in admitted if row.job.cancel.is_set()]:
            admitted.remove(row)
            _finish(row.job, _End("cancelled"))
        for rows, drop in ((group.rows, group.drop), (batch.rows, batch.remove)):
            gone = [row for row in rows if row.job.cancel.is_set()]
            for row in gone:
                _finish(row.job, _End("cancelled"))
            if gone:
                drop(gone)

    def _prefill_step(self, lm: _LoadedLM, group: _Group, batch: _Batch) -> None:
        """One prompt chunk of the group; after the last, each member's first code and the group's join."""
        rows = group.rows
        inputs, mask, positions = group.next_chunk(self.prefill_chunk)
        out = _forward(lm, rows, inputs, mask, positions, group.cache)
        if out is None:
            group.reset()
            return
        logits, cache = out
        if not group.advance(cache, int(inputs.shape[1])):
            return
        done = [row for i, row in enumerate(rows) if not self._sample(lm, row, logits[i])]
        group.hand_over(batch, done)
        self.peak_rows = max(self.peak_rows, len(batch.rows))

    def _decode_step(self, lm: _LoadedLM, batch: _Batch) -> None:
        """One forward over every row, then each row's own sampling; finished rows leave."""
        rows = batch.rows
        device = lm.device
        inputs = torch.tensor([[row.last] for row in rows], device=device)
        mask = None  # no padding (a row alone, or rows of one length): the causal path, no mask to build
        if any(row.length < batch.width for row in rows):
            mask = torch.zeros(len(rows), batch.width + 1, dtype=torch.long, device=device)
            for i, row in enumerate(rows):
                mask[i, batch.width - row.length :] = 1
        positions = torch.tensor([[row.length] for row in rows], device=device)
        out = _forward(lm, rows, inputs, mask, positions, batch.cache)
        if out is None:
            batch.remove(rows)
            return
        logits, batch.cache = out
        batch.width += 1
        for row in rows:
            row.length += 1
        done = [row for i, row in enumerate(rows) if not self._sample(lm, row, logits[i])]
        if done:
            batch.remove(done)

    def _sample(self, lm: _LoadedLM, row: _Row, logits: torch.Tensor) -> bool:
        """Sample the row's next code from its logits over the allowed ids ``[A]`` and post it; False once
        the row has left (finished, or failed: a failure here ends this row alone)."""
        params = row.job.params
        try:
            index = choose_next(logits, row.seen, params, row.generator)
        except Exception as exc:
            _finish(row.job, _failure(exc))
            return False
        if index >= SPEECH_CODES:
            _finish(row.job, _End("stop"))
            return False
        row.seen[index] = True
        row.job.post([index])
        row.generated += 1
        row.last = int(lm.allowed_ids[index])
        if row.generated >= params.max_tokens:
            _finish(row.job, _End("length"))
            return False
        return True


def _new_row(lm: _LoadedLM, job: _Job) -> _Row:
    """Tokenize the job's prompt (like vLLM: the tokenizer's special-token rule) and set up its sampler."""
    params = job.params
    prompt = lm.tokenizer(params.prompt, return_tensors="pt").input_ids.to(lm.device)
    job.prompt_tokens = int(prompt.shape[1])
    seen = torch.zeros(len(lm.allowed_ids), dtype=torch.bool, device=lm.device)
    in_prompt = lm.lm_to_allowed[prompt[0]]
    seen[in_prompt[in_prompt >= 0]] = True
    generator = None
    if params.seed is not None:
        generator = torch.Generator(device=lm.device).manual_seed(params.seed)
    return _Row(job, prompt, seen, generator)


def _forward(
    lm: _LoadedLM,
    rows: list[_Row],
    inputs: torch.Tensor,
    mask: torch.Tensor | None,
    positions: torch.Tensor | None,
    cache: Any,
) -> tuple[torch.Tensor, Any] | None:
    """One forward shared by ``rows`` (``inputs`` [B, T], ``cache`` theirs or None): the logits over the
    allowed ids at the last column ``[B, A]`` and the cache; None, every row failed, when it raises."""
    try:
        return lm.logits(input_ids=inputs, attention_mask=mask, position_ids=positions, past_key_values=cache)
    except Exception as exc:
        for row in rows:
            _finish(row.job, _failure(exc))
        return None


def _prompt(row: _Row) -> torch.Tensor:
    """The row's prompt ``[1, P]`` (how ``PrefillGroup.form`` reads it)."""
    return row.prompt


def _failure(exc: Exception) -> _End:
    """The end of a job that raised: its APIError, or a BackendError naming the exception."""
    if isinstance(exc, APIError):
        return _End("error", exc)
    return _End("error", BackendError(f"transformers generation failed: {exc!r}"))


def _finish(job: _Job, end: _End) -> None:
    """Post the job's end and let ``aclose`` return."""
    job.post(end)
    job.leave()
