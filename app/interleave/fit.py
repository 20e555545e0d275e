"""The interleaved prompt, and fitting the history into the caps and the LM window.

Each history turn is ``<|im_start|>{voice}: {text}<|speech_start|>{<|s_a|><|s_b|>...}<|im_end|>``; the
new turn follows as in the plain TTS prompt, so with no history the prompt is the plain one, byte for
byte. Prompt lengths are counted by a ``TokenCounter``: the model's tokenizer when one is available,
else ``estimate_tokens``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.interleave.turns import Turn, cut_to_tail, trailing_run
from app.lm.prompt import tts_prompt
from app.lm.speech_tokens import format_speech_tokens

TokenCounter = Callable[[str], int]
"""The number of LM tokens of a prompt."""

_SPECIAL = re.compile(r"<\|[^|<>]{0,64}\|>")
BYTES_PER_TOKEN_ESTIMATE = 3


def estimate_tokens(prompt: str) -> int:
    """An estimate of the LM tokens of ``prompt`` when no tokenizer is at hand.

    Every ``<|...|>`` token (speech tokens included) counts one, as in the model's vocabulary; the other
    text counts one token per 3 UTF-8 bytes, rounded up. Qwen's byte-level BPE averages about 4 bytes a
    token on English and 3 on CJK, so the estimate errs on the long side and the window is not overrun.
    """
    specials = len(_SPECIAL.findall(prompt))
    text = _SPECIAL.sub("", prompt).encode("utf-8", "surrogatepass")
    return specials + math.ceil(len(text) / BYTES_PER_TOKEN_ESTIMATE)


def history_prompt(history: Sequence[Turn], voice: str, text: str) -> str:
    """The prompt that speaks ``text`` in ``voice`` after the ``history`` turns (oldest first)."""
    turns = "".join(
        f"<|im_start|>{turn.voice}: {turn.text}<|speech_start|>{format_speech_tokens(turn.codes)}<|im_end|>"
        for turn in history
    )
    return turns + tts_prompt(voice, text)


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
