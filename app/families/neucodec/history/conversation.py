"""NeuCodec's interleaved generation: an id's stored turns fitted in front of the new one, the fallback, the
commit.

Fallback: with history in the prompt, an LM that stops ("stop") after fewer than
``min_plausible_codes(text)`` codes is taken as derailed by the history, and the turn is regenerated
once with the plain prompt. The utterance holds the audio back until that many codes exist (or the LM
has finished), so the decision is always made before the first byte is sent.

Prompt lengths are counted by the LM's own tokenizer when one is at hand (the in-process source's, or a
local TTS_MODEL directory's with the http backend), else estimated (``prompt.estimate_tokens``); the
same counter fits every NeuCodec prompt to LM_MAX_MODEL_LEN.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass

from app.core.stats import UtteranceStats
from app.families.neucodec.history.fit import Limits, Plan, TokenCounter, plan_prompt
from app.families.neucodec.history.tokenizer import load_local_tokenizer, tokenizer_counter
from app.families.neucodec.lm.types import GenerationParams, TokenSource
from app.families.neucodec.prompt import estimate_tokens
from app.families.neucodec.settings import NeuCodecSettings
from app.interleave.service import Interleave
from app.interleave.turns import Turn, unspaced
from app.observability.tracing import span

log = logging.getLogger(__name__)

CODES_PER_UNIT_FLOOR = 4  # 0.08 s per word or CJK character: 12.5 words/s, 3-4x faster than fast speech
MIN_PLAUSIBLE_CODES = 10
MAX_HOLD_CODES = 50  # 1 s of speech: the most audio the fallback check holds back


def speech_units(text: str) -> int:
    """Spoken units of ``text``: each whitespace-separated word with a letter or digit outside CJK, plus
    each CJK (wide or full-width) letter; punctuation alone counts nothing."""
    units = 0
    for word in text.split():
        wide = sum(1 for char in word if unspaced(char) and char.isalnum())
        units += wide + any(char.isalnum() and not unspaced(char) for char in word)
    return units


def min_plausible_codes(text: str) -> int:
    """The fewest codes a real reading of ``text`` can have: 4 per spoken unit, clamped to 10..50.

    Below this the LM has stopped before it could have said the text. The clamp keeps short texts
    checkable and bounds the audio held back for the check to 1 s.
    """
    return min(MAX_HOLD_CODES, max(MIN_PLAUSIBLE_CODES, CODES_PER_UNIT_FLOOR * speech_units(text)))


@dataclass(frozen=True)
class InterleaveTurn:
    """One speech request on an interleave id: its LM call with history, and what to commit after it.

    ``hold_codes`` is 0 when no fallback can happen (no history, or INTERLEAVE_FALLBACK off).
    """

    interleave_id: str
    voice: str
    text: str
    keep: int
    params: GenerationParams
    history: tuple[Turn, ...]
    hold_codes: int
    cold_params: GenerationParams

    def falls_back(self, stats: UtteranceStats) -> bool:
        """True when the LM stopped implausibly early with history (decided once it has finished)."""
        return self.hold_codes > 0 and stats.finish_reason == "stop" and stats.codes < self.hold_codes

    def cold(self) -> InterleaveTurn:
        """The same turn without history (the fallback)."""
        return dataclasses.replace(self, params=self.cold_params, history=(), hold_codes=0)

    def headers(self) -> dict[str, str]:
        """Response headers: the history turns and codes in the prompt."""
        return {
            "X-Interleave-Turns": str(len(self.history)),
            "X-Interleave-Tokens": str(sum(len(turn.codes) for turn in self.history)),
        }


class Conversations:
    """The family's side of the shared ``Interleave``: how prompt tokens are counted (``count``, also
    used to fit every prompt to the LM window), fitting history, the fallback and the commits."""

    def __init__(self, settings: NeuCodecSettings, interleave: Interleave) -> None:
        self.settings = settings
        self.interleave = interleave
        self.count: TokenCounter = estimate_tokens

    @property
    def enabled(self) -> bool:
        return self.interleave.enabled

    async def start(self, source: TokenSource) -> None:
        """Pick the token counter (the LM source's tokenizer, else the tokenizer of a local TTS_MODEL
        directory with the http backend, else the estimate), then start the shared store."""
        tokenizer = getattr(source, "tokenizer", None)
        if tokenizer is None and self.settings.LM_BACKEND == "http":
            tokenizer = await asyncio.to_thread(load_local_tokenizer, self.settings.TTS_MODEL)
        if tokenizer is not None:
            self.count = tokenizer_counter(tokenizer)
        log.info("NeuCodec prompt tokens %s", "counted by the tokenizer" if tokenizer else "estimated")
        await self.interleave.start()

    async def close(self) -> None:
        await self.interleave.close()

    def limits(self, keep: int) -> Limits:
        s = self.settings
        return Limits(keep, self.interleave.max_codes, s.LM_MAX_MODEL_LEN, s.INTERLEAVE_MIN_GEN_TOKENS)

    async def prepare(
        self, interleave_id: str, voice: str, text: str, params: GenerationParams, keep: int
    ) -> InterleaveTurn:
        """The request's LM call with the id's history fitted in front of ``text`` (``params`` holds the
        plain prompt and the requested max_tokens). An unreadable store means no history."""
        turns = await self.interleave.history(interleave_id)
        return await self._turn(interleave_id, voice, text, params, keep, turns)

    async def fresh(
        self, interleave_id: str, voice: str, text: str, params: GenerationParams, keep: int
    ) -> InterleaveTurn:
        """The first turn of a conversation the store does not hold (``text`` with no history), so that
        the turns after it can follow it (a realtime turn's segments)."""
        return await self._turn(interleave_id, voice, text, params, keep, [])

    async def follow(
        self, turn: InterleaveTurn, spoken: UtteranceStats, text: str, params: GenerationParams
    ) -> InterleaveTurn:
        """The next part of a long input on ``turn``'s id: ``text`` prompted with ``turn``'s history and
        ``turn`` itself as the newest turn when it was spoken whole (``spoken``: its stats, finished
        "stop" with codes; else without it). ``params`` holds the plain prompt and max_tokens."""
        turns = list(turn.history)
        if spoken.finish_reason == "stop" and spoken.tokens:
            turns.append(Turn(turn.voice, turn.text, tuple(spoken.tokens)))
        return await self._turn(turn.interleave_id, turn.voice, text, params, turn.keep, turns)

    async def _turn(
        self,
        interleave_id: str,
        voice: str,
        text: str,
        params: GenerationParams,
        keep: int,
        turns: list[Turn],
    ) -> InterleaveTurn:
        """``text``'s turn with ``turns`` (oldest first) fitted in front of it."""
        limits = self.limits(keep)
        with span("tts.interleave", {"interleave.stored_turns": len(turns)}) as traced:
            plan, cold = await asyncio.to_thread(self._plans, turns, voice, text, params.max_tokens, limits)
            fallback = bool(plan.history) and self.settings.INTERLEAVE_FALLBACK
            traced.set(
                {
                    "interleave.history_turns": len(plan.history),
                    "interleave.history_codes": plan.history_codes,
                    "interleave.prompt_tokens": plan.prompt_tokens,
                    "interleave.fallback_armed": fallback,
                }
            )
        return InterleaveTurn(
            interleave_id,
            voice,
            text,
            keep,
            dataclasses.replace(params, prompt=plan.prompt, max_tokens=plan.max_tokens),
            plan.history,
            min_plausible_codes(text) if fallback else 0,
            dataclasses.replace(params, prompt=cold.prompt, max_tokens=cold.max_tokens),
        )

    def _plans(
        self, turns: list[Turn], voice: str, text: str, max_tokens: int, limits: Limits
    ) -> tuple[Plan, Plan]:
        """The fitted plan and the plain one (blocking: the tokenizer may count)."""
        plan = plan_prompt(turns, voice, text, max_tokens, limits, self.count)
        cold = plan_prompt([], voice, text, max_tokens, limits, self.count) if plan.history else plan
        return plan, cold

    def fell_back(self) -> None:
        """Count a fallback regeneration."""
        self.interleave.counters.add("fallbacks")
        log.info("interleave fallback: the LM stopped implausibly early with history; regenerating cold")

    async def land(self, turn: InterleaveTurn, stats: UtteranceStats) -> None:
        """``commit``, then wait until the turn is stored (at most the shared commit wait)."""
        record = self._record(turn, stats)
        if record is not None:
            await self.interleave.commit_turn(turn.interleave_id, record, turn.keep)

    def commit(self, turn: InterleaveTurn, stats: UtteranceStats) -> None:
        """Store the finished turn in the background when its generation ended normally ("stop") with
        at least one code; a cut (length), cancelled or failed generation is not a turn."""
        record = self._record(turn, stats)
        if record is not None:
            self.interleave.append(turn.interleave_id, record, turn.keep)

    @staticmethod
    def _record(turn: InterleaveTurn, stats: UtteranceStats) -> Turn | None:
        if stats.finish_reason != "stop" or not stats.tokens:
            return None
        return Turn(turn.voice, turn.text, tuple(stats.tokens))
