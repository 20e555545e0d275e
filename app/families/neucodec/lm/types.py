"""The contract every speech-token source implements.

A source turns a prompt into a stream of NeuCodec speech codes (``<|s_N|>`` -> ``N``, 0..65535, 50 per
second of audio). Streams yield *deltas*: non-empty lists of codes in the order the LM produced them,
one list per upstream event, so a fast backend is not paid for one await per token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from app.core.types import FinishReason


@dataclass(frozen=True)
class GenerationParams:
    """Everything one LM generation needs; ``top_p``/``top_k``/``seed`` are sent only when set."""

    prompt: str
    model: str
    max_tokens: int
    temperature: float
    repetition_penalty: float
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None


class TokenStream(Protocol):
    """One running generation. Iterate it for code deltas; ``aclose`` aborts it upstream.

    ``finish_reason`` is None while running and set when the iteration ends: ``stop`` (the model ended
    the utterance), ``length`` (max_tokens reached), ``cancelled`` (closed by us). Errors raise
    ``app.core.errors.APIError`` subclasses (BackendError 502, BackendTimeout 504) from ``__anext__``.
    ``prompt_tokens`` is the prompt's length in LM tokens once the backend has reported it (None before,
    or when the backend does not say).
    """

    @property
    def finish_reason(self) -> FinishReason | None: ...

    @property
    def prompt_tokens(self) -> int | None: ...

    def __aiter__(self) -> AsyncIterator[list[int]]: ...

    async def aclose(self) -> None: ...


class TokenSource(Protocol):
    """A backend that runs generations. Built by the Engine, started in the lifespan, closed at shutdown."""

    name: str

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def ready(self) -> bool:
        """True when a generation could start now (model loaded, backend reachable)."""
        ...

    def generate(self, params: GenerationParams) -> TokenStream: ...
