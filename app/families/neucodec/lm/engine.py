"""The NeuCodec speech-token LM on the shared batched row scheduler (``app.families.shared.scheduler``).

The scheduler admits, groups, prefills and steps; this engine gives the model's part: a row is one
generation's prompt (tokenized like vLLM does: the tokenizer's own special-token rule, so both backends
agree), its repetition-penalty history and its seed; the forward is the decoder plus the speech head (logits
over the speech and stop ids only); sampling is batched over the rows with each row's own settings and
seed (``app.lm.sampling.choose``: temperature, top-k, top-p, repetition penalty, a counter-based uniform
per row and inverse-CDF), so a request's codes depend only on its own prompt, parameters and seed, never
on who shares its steps (tested: batched equals alone). With ``max_rows`` 1 it is the one-at-a-time
engine.

**A step costs the rows almost nothing beyond the forward.** The rows stepping together keep their
sampling state stacked (``Stacked``: settings, histories, the last code of each) from one step to the
next, rebuilt only when a row joins or leaves; a step is the batched sampling, one host read (the codes
and which rows ended) and one hand-over of every row's code to the event loop (``post_all``).

**Why a hand-written loop**: transformers' own continuous batching (``generate_batch`` /
``ContinuousBatchingManager``, 5.x) samples with one ``GenerationConfig`` for the whole batch, so it has
no per-request repetition penalty, and seeds through the process-wide RNG (``set_seed``), a side effect
on every other user of torch's global generator and no per-request reproducibility.

**The cache is one padded batch** (``app.lm.padded_cache``): merging per-row ``DynamicCache`` objects
each step would copy every row's whole cache on every step, while the padded batch copies only when a
row joins or leaves, and transformers' SDPA path already handles a 2-D padding mask with per-row
position ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.utils.rnn import pad_sequence

from app.core.types import FinishReason
from app.families.neucodec.lm.loading import LoadedLM
from app.families.neucodec.lm.types import GenerationParams
from app.families.neucodec.speech_tokens import SPEECH_CODES
from app.families.shared.handoff import Handoff, post_all
from app.families.shared.scheduler import BatchedEngine
from app.families.shared.stacking import Restack
from app.lm.sampling import BatchSampling, RowSampling, choose, random_seed

ENDINGS: tuple[FinishReason, ...] = ("stop", "length", "error")  # a row's ending 1, 2, 3 in ``sample``


@dataclass(eq=False)
class Generation(Handoff[list[int]]):
    """One generation's codes on their way to the event loop, and its prompt length once tokenized."""

    prompt_tokens: int | None = None


@dataclass(eq=False)
class TokenRow:
    """One generation inside the loop: its prompt and its sampling state (while it steps in a batch, the
    batch's ``Stacked`` holds the up-to-date ``history`` and ``last``; they are written back when the
    batch changes)."""

    handoff: Generation
    params: GenerationParams
    prompt: torch.Tensor  # [1, P] LM ids
    sampling: RowSampling
    history: torch.Tensor  # [S + max_tokens] allowed-id indices seen (prompt's, then codes), -1 = free
    seen: int  # entries of ``history`` in use
    length: int = 0  # tokens in its cache (prompt + codes fed back), set once prefilled
    generated: int = 0
    last: int = 0  # LM id of the code chosen last: the next step's input

    @property
    def reserved(self) -> int:
        """Cache columns this row may need: its whole prompt plus every code it may generate."""
        return int(self.prompt.shape[1]) + self.params.max_tokens


@dataclass(eq=False)
class Stacked:
    """The sampling state of the rows stepping together, ``[B, ...]`` in their order."""

    rows: list[TokenRow]
    handoffs: list[Generation]
    settings: BatchSampling
    history: torch.Tensor  # [B, H] long, -1 = free
    seen: torch.Tensor  # [B] entries in use
    generated: torch.Tensor  # [B] codes made so far (the draw's counter)
    max_tokens: torch.Tensor  # [B]
    last: torch.Tensor  # [B] LM ids fed next
    width: int  # the most entries in use in any row

    @classmethod
    def of(cls, rows: list[TokenRow], device: torch.device) -> Stacked:
        def column(values: list[int]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.long, device=device)

        return cls(
            list(rows),
            [row.handoff for row in rows],
            BatchSampling.of([row.sampling for row in rows], device),
            pad_sequence([row.history for row in rows], batch_first=True, padding_value=-1),
            column([row.seen for row in rows]),
            column([row.generated for row in rows]),
            column([row.params.max_tokens for row in rows]),
            column([row.last for row in rows]),
            max(row.seen for row in rows),
        )

    def write_back(self) -> None:
        """Each row's state back into the row (its history a view of the stack's)."""
        seen, generated, last = self.seen.tolist(), self.generated.tolist(), self.last.tolist()
        for i, row in enumerate(self.rows):
            row.history = self.history[i, : row.history.shape[0]]
            row.seen, row.generated, row.last = seen[i], generated[i], last[i]


class SpeechTokenEngine(BatchedEngine[GenerationParams, TokenRow]):
    """Speech codes for many generations at once on one loaded LM (see the module docstring)."""

    def __init__(self, lm: LoadedLM, name: str, **limits: Any) -> None:
        super().__init__(name, lm.device, **limits)
        self.lm = lm
        # the stacked state of the rows stepping (restacked when the batch changes)
        self.stacked: Restack[TokenRow, Stacked] = Restack(lambda rows: Stacked.of(rows, self.lm.device))

    def prepare(self, job: GenerationParams, handoff: Handoff[Any]) -> TokenRow:
        lm = self.lm
        assert isinstance(handoff, Generation)
        prompt = lm.tokenizer(job.prompt, return_tensors="pt").input_ids.to(lm.device)
        handoff.prompt_tokens = int(prompt.shape[1])
        in_prompt = lm.lm_to_allowed[prompt[0]]
        in_prompt = in_prompt[in_prompt >= 0]
        history = torch.full((len(in_prompt) + job.max_tokens,), -1, dtype=torch.long, device=lm.device)
        history[: len(in_prompt)] = in_prompt
        top_k = job.top_k if job.top_k is not None and job.top_k > 0 else 0
        top_p = job.top_p if job.top_p is not None else 1.0
        seed = job.seed if job.seed is not None else random_seed()
        sampling = RowSampling(job.temperature, top_k, top_p, job.repetition_penalty, seed)
        return TokenRow(handoff, job, prompt, sampling, history, len(in_prompt))

    def prompt(self, row: TokenRow) -> torch.Tensor:
        return row.prompt

    def forward(
        self,
        rows: list[TokenRow],
        inputs: torch.Tensor,
        mask: torch.Tensor | None,
        positions: torch.Tensor | None,
        cache: Any,
    ) -> tuple[torch.Tensor, Any]:
        """The logits over the allowed ids at the last column ``[B, A]`` and the cache."""
        return self.lm.logits(
            input_ids=inputs, attention_mask=mask, position_ids=positions, past_key_values=cache
        )

    def step_inputs(self, rows: list[TokenRow]) -> torch.Tensor:
        return self.stacked(rows).last[:, None]

    def sample(self, rows: list[TokenRow], out: torch.Tensor) -> list[TokenRow]:
        """Every row's next code from its logits over the allowed ids ``out`` [B, A], in one batched
        ``choose``; codes posted, ended rows finished (a row that could not sample fails alone). Returns
        the rows that left."""
        state = self.stacked(rows)
        codes, failed = choose(out, state.history[:, : state.width], state.settings, state.generated)
        stop = codes >= SPEECH_CODES
        length = state.generated + 1 >= state.max_tokens
        # the step's one host read: each row's code and how it ends (0 going on, 1 stop, 2 length, 3 error)
        ending = torch.where(failed, 3, torch.where(stop, 1, torch.where(length, 2, 0)))
        host_codes, host_ending = torch.stack([codes, ending]).tolist()
        state.history.scatter_(1, state.seen[:, None], codes[:, None])
        state.seen += 1
        state.generated += 1
        state.last = self.lm.allowed_ids[codes]
        state.width += 1
        if not any(host_ending):
            post_all(state.handoffs, [[code] for code in host_codes])
            return []
        going = [i for i, end in enumerate(host_ending) if end in (0, 2)]
        post_all([state.handoffs[i] for i in going], [[host_codes[i]] for i in going])
        gone = []
        for i, end in enumerate(host_ending):
            if end:
                error = self.failure(ValueError("the logits are not finite")) if end == 3 else None
                self.finish(rows[i], ENDINGS[end - 1], error)
                gone.append(rows[i])
        return gone
