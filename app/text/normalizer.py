"""The text normalizer every endpoint uses: picks the mode, applies fallbacks, keeps the loop free.

Modes: ``rule`` (clean up; Malaysian entities with ``normalize_malaysian``), ``spoken`` (clean up,
then the full verbalizer; with ``normalize_malaysian`` the Malaysian pronunciation table first, as in
``rule``) and ``llm`` (clean up, then the chat model). ``llm`` on
``/v1/audio/normalize`` (``for_speech=False``) fails loudly: 400 when no model is configured, 502
when the call fails. On the speech path (``for_speech=True``) both fall back to ``spoken``, and
``NormalizeResult.fallback`` says why ("unconfigured" or "error").

The rule and spoken modes are pure Python, microseconds per sentence; texts longer than
``offload_chars`` run in a worker thread so a long input never holds the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

from app.core.defaults import MAX_PROMPT_CHARS
from app.core.errors import InvalidRequest, echo
from app.core.types import Attributes, Language
from app.core.types import NormalizerMode as Mode
from app.observability.tracing import span
from app.text.invisible import strip_invisible
from app.text.llm import LLMNormalizer, LLMNormalizerError
from app.text.rule import clean, normalize_rule
from app.text.rule.pronunciation import apply_pronunciations
from app.text.spoken import normalize_spoken

__all__ = ["LANGUAGES", "MODES", "Language", "Mode", "NormalizeResult", "TextNormalizer"]

logger = logging.getLogger(__name__)

MODES: tuple[str, ...] = get_args(Mode)
LANGUAGES: tuple[str, ...] = get_args(Language)


@dataclass(frozen=True)
class NormalizeResult:
    """The normalized text, the mode that produced it and, when it is not the one asked for, why."""

    output: str
    mode_used: Mode
    fallback: Literal["unconfigured", "error"] | None = None


def normalize_spoken_mode(text: str, language: str = "auto", normalize_malaysian: bool = False) -> str:
    """The ``spoken`` mode: ``clean``, then (``normalize_malaysian``) the pronunciation table, then the
    verbalizer."""
    cleaned = clean(text)
    return normalize_spoken(apply_pronunciations(cleaned) if normalize_malaysian else cleaned, language)


class TextNormalizer:
    """Dispatches ``rule``/``spoken``/``llm``. ``llm`` is None when no model is configured."""

    def __init__(self, llm: LLMNormalizer | None, offload_chars: int = 2000) -> None:
        if offload_chars < 0:
            raise ValueError("offload_chars must be >= 0")
        self.llm = llm
        self.offload_chars = offload_chars

    async def normalize(
        self,
        text: str,
        mode: Mode = "rule",
        normalize_malaysian: bool = False,
        language: str = "auto",
        prompt: str | None = None,
        for_speech: bool = False,
    ) -> NormalizeResult:
        """``text`` normalized by ``mode``.

        Raises ``InvalidRequest`` (400) for a bad mode, language or prompt and for an unconfigured
        ``llm`` off the speech path, ``LLMNormalizerError`` (502) for a failed ``llm`` call there.
        """
        if mode not in MODES:
            raise InvalidRequest(f"mode must be one of {', '.join(MODES)}, got {echo(mode)}", param="mode")
        if language not in LANGUAGES:
            raise InvalidRequest(
                f"language must be one of {', '.join(LANGUAGES)}, got {echo(language)}", param="language"
            )
        if prompt is not None and len(prompt) > MAX_PROMPT_CHARS:
            raise InvalidRequest(f"prompt is longer than {MAX_PROMPT_CHARS} characters", param="prompt")
        if mode == "rule":
            with span("normalize.rule", {"normalizer.malaysian": normalize_malaysian}):
                output = await self._run(
                    normalize_rule, text, normalize_malaysian=normalize_malaysian, language=language
                )
            return NormalizeResult(output, "rule")
        if mode == "spoken":
            with span("normalize.spoken", {"normalizer.malaysian": normalize_malaysian}):
                output = await self._run(
                    normalize_spoken_mode, text, language=language, normalize_malaysian=normalize_malaysian
                )
            return NormalizeResult(output, "spoken")
        return await self._normalize_llm(text, language, prompt, for_speech)

    async def _normalize_llm(
        self, text: str, language: str, prompt: str | None, for_speech: bool
    ) -> NormalizeResult:
        if self.llm is None and not for_speech:
            raise InvalidRequest(
                "mode 'llm' is not configured on this server (OPENAI_BASE_URL and OPENAI_MODEL_NAME)",
                param="mode",
            )
        cleaned = await self._run(clean, text)
        if self.llm is None:
            return await self._spoken_fallback(cleaned, language, "unconfigured")
        try:
            attributes: Attributes = {
                "llm.model": self.llm.model,
                "llm.url": str(self.llm.url),
                "llm.timeout_s": self.llm.timeout_s,
            }
            with span("normalize.llm", attributes):
                output = await self.llm.normalize(cleaned, language, prompt)
            return NormalizeResult(strip_invisible(output), "llm")  # the model's reply is input too
        except LLMNormalizerError as exc:
            if not for_speech:
                raise
            logger.warning("llm normalizer failed, falling back to spoken: %s", exc.message)
            return await self._spoken_fallback(cleaned, language, "error")

    async def _spoken_fallback(
        self, cleaned: str, language: str, reason: Literal["unconfigured", "error"]
    ) -> NormalizeResult:
        """The ``spoken`` reading of already cleaned text, marked as a fallback for ``reason``."""
        with span("normalize.spoken", {"normalizer.fallback": reason}):
            output = await self._run(normalize_spoken, cleaned, language=language)
        return NormalizeResult(output, "spoken", reason)

    async def _run(self, function: Callable[..., str], text: str, **kwargs: str | bool) -> str:
        """``function(text, **kwargs)``: inline for short ``text``, in a worker thread for long."""
        if len(text) > self.offload_chars:
            return await asyncio.to_thread(function, text, **kwargs)
        return function(text, **kwargs)
