"""Fitting an id's history into the caps and the LM window, in front of the new turn.

The prompt format itself (history turns, then the plain TTS prompt) is ``app.families.neucodec.prompt``'s.
Prompt
lengths are counted by a ``TokenCounter``: the model's tokenizer when one is available, else
``app.families.neucodec.prompt.estimate_tokens``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.families.neucodec.prompt import history_prompt
from app.interleave.turns import Turn, cut_to_tail, trailing_run

TokenCounter = Callable[[str], int]
"""The number of LM tokens of a prompt."""


@dataclass(frozen=True)
class Limits:
    """The caps on one prompt's history: turns (0 = no limit), speech codes, and the LM window."""

    max_turns: int
    max_codes: int
    max_model_len: int
    min_gen_tokens: int


@dataclass(frozen=True)
class Plan:
    """A fitted prompt: the history it holds (possibly cut), its length and the clamped max_tokens."""

    prompt: str
    history: tuple[Turn, ...]
    prompt_tokens: int
    max_tokens: int

    @property
    def history_codes(self) -> int:
        """Speech codes of the history in the prompt."""
        return sum(len(turn.codes) for turn in self.history)


def plan_prompt(
    turns: Sequence[Turn],
    voice: str,
    text: str,
    max_tokens: int,
    limits: Limits,
    count: TokenCounter,
) -> Plan:
    """Fit the stored ``turns`` (oldest first) in front of the new turn.

    Only the trailing run in ``voice`` is used, then at most ``limits.max_turns`` of it, then the newest
    turns up to ``limits.max_codes`` codes (the oldest one that does not fit whole is cut to its tail).
    Then, if the prompt leaves less than ``min_gen_tokens`` of the window, the oldest turns are dropped
    and the oldest remaining one is cut to the longest tail that fits (binary search: about a dozen
    counts). ``max_tokens`` is clamped to the room left (at least 1).
    """
    run = trailing_run(turns, voice)
    if limits.max_turns:
        run = run[-limits.max_turns :]
    history: list[Turn] = []
    budget = limits.max_codes
    for turn in reversed(run):
        if budget <= 0:
            break
        history.append(cut_to_tail(turn, budget))
        budget -= len(turn.codes)
    history.reverse()
    prompt_budget = limits.max_model_len - limits.min_gen_tokens

    def fits(candidate: Sequence[Turn]) -> bool:
        return count(history_prompt(candidate, voice, text)) <= prompt_budget

    while history and not fits(history):
        oldest, rest = history[0], history[1:]
        if not fits([cut_to_tail(oldest, 1), *rest]):
            del history[0]
            continue
        low, high = 1, len(oldest.codes) - 1  # 1 code fits, all of them do not
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if fits([cut_to_tail(oldest, mid), *rest]) else (low, mid - 1)
        history[0] = cut_to_tail(oldest, low)
    prompt = history_prompt(history, voice, text)
    tokens = count(prompt)
    return Plan(prompt, tuple(history), tokens, max(1, min(max_tokens, limits.max_model_len - tokens)))
