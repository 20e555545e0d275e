"""Interleave for the speech route: load and fit an id's history, decide the fallback, commit turns.

Store failures never fail a request: a history that cannot be read is an empty one (cold start), a
turn that cannot be stored is dropped; both are logged and counted in ``counters``. A commit runs as a
task that the response's end waits for (``land``, at most ``COMMIT_WAIT_S``): the turn is in the store
before the last bytes are sent, so a next request on any worker or replica finds it. A commit that takes
longer goes on in the background; a later request (or GET/DELETE) on the same id in this process then
waits for it.

Fallback: with history in the prompt, an LM that stops ("stop") after fewer than
``min_plausible_codes(text)`` codes is taken as derailed by the history, and the turn is regenerated
once with the plain prompt. The route holds the audio back until that many codes exist (or the LM has
finished), so the decision is always made before the first byte is sent.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass

from app.config import Settings
from app.core.stats import UtteranceStats
from app.interleave.fit import Limits, Plan, TokenCounter, plan_prompt
from app.interleave.ids import HEADER, header_echo
from app.interleave.stores.base import History, StoreError, TurnStore
from app.interleave.stores.factory import build_store, max_history_codes
from app.interleave.tokenizer import load_local_tokenizer, tokenizer_counter
from app.interleave.turns import Turn, unspaced
from app.lm.prompt import estimate_tokens
from app.lm.types import GenerationParams, TokenSource
from app.observability.metrics import Metrics
from app.observability.tracing import span

log = logging.getLogger(__name__)

CODES_PER_UNIT_FLOOR = 4  # 0.08 s per word or CJK character: 12.5 words/s, 3-4x faster than fast speech
MIN_PLAUSIBLE_CODES = 10
MAX_HOLD_CODES = 50  # 1 s of speech: the most audio the fallback check holds back
COMMIT_WAIT_S = 1.0  # longest a response's end waits for its turn to be stored (the stores' own timeout)


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


@dataclass
class InterleaveCounters:
    """What went wrong or happened (per process); each count also goes to ``tts_interleave_events``."""

    commits: int = 0
    commit_failures: int = 0
    load_failures: int = 0
    fallbacks: int = 0
    metrics: Metrics | None = None

    def add(self, event: str) -> None:
        """Count one ``event`` (a field name) here and in the app's metrics."""
        setattr(self, event, getattr(self, event) + 1)
        if self.metrics is not None:
            self.metrics.observe_interleave(event)


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
        """Response headers: the id (percent-encoded unless printable ASCII), history turns and codes."""
        return {
            HEADER: header_echo(self.interleave_id),
            "X-Interleave-Turns": str(len(self.history)),
            "X-Interleave-Tokens": str(sum(len(turn.codes) for turn in self.history)),
        }


class Interleave:
    """The engine's interleave state: the store (None when INTERLEAVE_STORE=off) and how prompt tokens
    are counted (``count``, also used to fit every prompt to the LM window)."""

    def __init__(self, settings: Settings, store: TurnStore | None, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.store = store
        self.counters = InterleaveCounters(metrics=metrics)
        self.max_codes = max_history_codes(settings)
        self.count: TokenCounter = estimate_tokens
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._users = 0  # families that started the store and have not closed it

    @classmethod
    def from_settings(cls, settings: Settings, metrics: Metrics | None = None) -> Interleave:
        return cls(settings, build_store(settings), metrics)

    @property
    def enabled(self) -> bool:
        return self.store is not None

    async def start(self, source: TokenSource | None = None) -> None:
        """Pick the token counter (the LM source's tokenizer, else the tokenizer of a local TTS_MODEL
        directory with the http backend, else the estimate; a family without a NeuCodec LM source passes
        none and leaves the counter alone), then start the store. Every family that starts it closes it
        once; the store opens with the first and closes with the last."""
        tokenizer = None
        if source is not None:
            tokenizer = getattr(source, "tokenizer", None)
            if tokenizer is None and self.settings.LM_BACKEND == "http":
                tokenizer = await asyncio.to_thread(load_local_tokenizer, self.settings.TTS_MODEL)
            if tokenizer is not None:
                self.count = tokenizer_counter(tokenizer)
        self._users += 1
        if self.store is None or self._users > 1:
            return
        await self.store.start()
        log.info(
            "interleave store %s; prompt tokens %s",
            self.store.name,
            "counted by the tokenizer" if tokenizer is not None else "estimated",
        )

    async def close(self) -> None:
        """Finish the pending commits, then close the store (when the last family that started it
        closes; also safe when it was never started)."""
        self._users = max(0, self._users - 1)
        if self._users:
            return
        if self._pending:
            await asyncio.gather(*self._pending.values(), return_exceptions=True)
        if self.store is not None:
            await self.store.close()

    def limits(self, keep: int) -> Limits:
        s = self.settings
        return Limits(keep, self.max_codes, s.LM_MAX_MODEL_LEN, s.INTERLEAVE_MIN_GEN_TOKENS)

    async def _settled(self, interleave_id: str) -> None:
        """Wait for this process's pending commit on the id, if any (never cancels it)."""
        task = self._pending.get(interleave_id)
        if task is not None:
            await asyncio.shield(task)

    async def inspect(self, interleave_id: str) -> History:
        """The id's stored history (raises StoreError)."""
        assert self.store is not None
        await self._settled(interleave_id)
        return await self.store.load(interleave_id)

    async def forget(self, interleave_id: str) -> bool:
        """Delete the id now; True when it had turns (raises StoreError)."""
        assert self.store is not None
        await self._settled(interleave_id)
        return await self.store.delete(interleave_id)

    async def prepare(
        self, interleave_id: str, voice: str, text: str, params: GenerationParams, keep: int
    ) -> InterleaveTurn:
        """The request's LM call with the id's history fitted in front of ``text`` (``params`` holds the
        plain prompt and the requested max_tokens). An unreadable store means no history."""
        turns = await self.history(interleave_id)
        return await self._turn(interleave_id, voice, text, params, keep, turns)

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

    async def history(self, interleave_id: str) -> list[Turn]:
        """The id's stored turns, oldest first; none (counted, logged) when the store cannot be read."""
        assert self.store is not None
        try:
            return (await self.inspect(interleave_id)).turns
        except StoreError as exc:
            self.counters.add("load_failures")
            log.warning("interleave history unavailable, going on cold: %s", exc)
            return []

    def _plans(
        self, turns: list[Turn], voice: str, text: str, max_tokens: int, limits: Limits
    ) -> tuple[Plan, Plan]:
        """The fitted plan and the plain one (blocking: the tokenizer may count)."""
        plan = plan_prompt(turns, voice, text, max_tokens, limits, self.count)
        cold = plan_prompt([], voice, text, max_tokens, limits, self.count) if plan.history else plan
        return plan, cold

    def fell_back(self) -> None:
        """Count a fallback regeneration."""
        self.counters.add("fallbacks")
        log.info("interleave fallback: the LM stopped implausibly early with history; regenerating cold")

    async def land(self, turn: InterleaveTurn, stats: UtteranceStats) -> None:
        """``commit``, then wait up to COMMIT_WAIT_S for the turn to be stored (never cancels it)."""
        task = self.commit(turn, stats)
        if task is not None:
            await asyncio.wait({task}, timeout=COMMIT_WAIT_S)

    def commit(self, turn: InterleaveTurn, stats: UtteranceStats) -> asyncio.Task[None] | None:
        """Store the finished turn in a task when its generation ended normally ("stop") with at least one
        code; a cut (length), cancelled or failed generation is not a turn (None)."""
        if self.store is None or stats.finish_reason != "stop" or not stats.tokens:
            return None
        return self.append(turn.interleave_id, Turn(turn.voice, turn.text, tuple(stats.tokens)), turn.keep)

    async def commit_turn(self, interleave_id: str, record: Turn, keep: int) -> None:
        """``append``, then wait up to COMMIT_WAIT_S for the turn to be stored (never cancels it): a
        family's own finished turn (one whose generation ended normally), kept as ``land`` keeps one."""
        task = self.append(interleave_id, record, keep)
        if task is not None:
            await asyncio.wait({task}, timeout=COMMIT_WAIT_S)

    def append(self, interleave_id: str, record: Turn, keep: int) -> asyncio.Task[None] | None:
        """Store ``record`` after the id's turns in a task (in order with this process's earlier
        commits on the id, keeping what ``turns.retain`` keeps for ``keep``); None with no store."""
        if self.store is None:
            return None
        key = interleave_id
        task = asyncio.create_task(self._append(key, record, keep, self._pending.get(key)))
        self._pending[key] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._pending.get(key) is finished:
                del self._pending[key]

        task.add_done_callback(done)
        return task

    async def _append(
        self, interleave_id: str, turn: Turn, keep: int, after: asyncio.Task[None] | None
    ) -> None:
        if after is not None:
            await asyncio.gather(after, return_exceptions=True)  # one id's commits land in order
        assert self.store is not None
        try:
            await self.store.append(interleave_id, turn, keep)
        except Exception as exc:
            self.counters.add("commit_failures")
            log.warning("interleave turn not stored: %r", exc)
            return
        self.counters.add("commits")
