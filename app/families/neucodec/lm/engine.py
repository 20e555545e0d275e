"""The NeuCodec speech-token LM on the shared batched row scheduler (``app.families.shared.scheduler``).

The scheduler admits, groups, prefills and steps; this engine gives the model's part: a row is one
generation's prompt (tokenized like vLLM does: the tokenizer's own special-token rule, so both backends
agree), its repetition-penalty history and its seeded ``torch.Generator``; the forward is the decoder
plus the speech head (logits over the speech and stop ids only); sampling is each row's own
(``choose_next``: temperature, top-k, top-p, repetition penalty), so a request's codes depend only on its
own prompt, parameters and seed, never on who shares its steps (tested: batched equals alone). With
``max_rows`` 1 it is the one-at-a-time engine.

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

from app.families.neucodec.lm.loading import LoadedLM
from app.families.neucodec.lm.sampling import choose_next
from app.families.neucodec.lm.types import GenerationParams
from app.families.neucodec.speech_tokens import SPEECH_CODES
from app.families.shared.handoff import Handoff
from app.families.shared.scheduler import BatchedEngine


@dataclass(eq=False)
class Generation(Handoff[list[int]]):
    """One generation's codes on their way to the event loop, and its prompt length once tokenized."""

    prompt_tokens: int | None = None


@dataclass(eq=False)
class TokenRow:
    """One generation inside the loop: its prompt and its sampling state."""

    handoff: Generation
    params: GenerationParams
    prompt: torch.Tensor  # [1, P] LM ids
    seen: torch.Tensor  # [A] bool over the allowed ids: repetition-penalty history
    generator: torch.Generator | None
    length: int = 0  # tokens in its cache (prompt + codes fed back), set once prefilled
    generated: int = 0
    last: int = 0  # LM id of the code chosen last: the next step's input

    @property
    def reserved(self) -> int:
        """Cache columns this row may need: its whole prompt plus every code it may generate."""
        return int(self.prompt.shape[1]) + self.params.max_tokens


class SpeechTokenEngine(BatchedEngine[GenerationParams, TokenRow]):
    """Speech codes for many generations at once on one loaded LM (see the module docstring)."""

    def __init__(self, lm: LoadedLM, name: str, **limits: Any) -> None:
        super().__init__(name, lm.device, **limits)
        self.lm = lm

    def prepare(self, job: GenerationParams, handoff: Handoff[Any]) -> TokenRow:
        lm = self.lm
        assert isinstance(handoff, Generation)
        prompt = lm.tokenizer(job.prompt, return_tensors="pt").input_ids.to(lm.device)
        handoff.prompt_tokens = int(prompt.shape[1])
        seen = torch.zeros(len(lm.allowed_ids), dtype=torch.bool, device=lm.device)
        in_prompt = lm.lm_to_allowed[prompt[0]]
        seen[in_prompt[in_prompt >= 0]] = True
        generator = None
        if job.seed is not None:
            generator = torch.Generator(device=lm.device).manual_seed(job.seed)
        return TokenRow(handoff, job, prompt, seen, generator)

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
        return torch.tensor([[row.last] for row in rows], device=self.device)

    def sample(self, rows: list[TokenRow], out: torch.Tensor) -> list[TokenRow]:
        return [row for i, row in enumerate(rows) if not self._sample(row, out[i])]

    def _sample(self, row: TokenRow, logits: torch.Tensor) -> bool:
        """Sample the row's next code from its logits over the allowed ids ``[A]`` and post it; False once
        the row has left (finished, or failed: a failure here ends this row alone)."""
        params = row.params
        try:
            index = choose_next(logits, row.seen, params, row.generator)
        except Exception as exc:
            self.finish(row, "error", self.failure(exc))
            return False
        if index >= SPEECH_CODES:
            self.finish(row, "stop")
            return False
        row.seen[index] = True
        row.handoff.post([index])
        row.generated += 1
        row.last = int(self.lm.allowed_ids[index])
        if row.generated >= params.max_tokens:
            self.finish(row, "length")
            return False
        return True
