"""Long inputs for the NeuCodec family: the text cut into parts that one generation each can speak.

A part fits when the codes it may need stay within one generation: its estimated speech time
(``app.text.duration.speech_seconds``, a slow reader's pace) times 50 codes per second must not exceed
``max_tokens`` (a per-generation bound), nor the room its prompt leaves in the LM window (at least
``MIN_ROOM_TOKENS``). With interleave, history may take the window down to ``INTERLEAVE_MIN_GEN_TOKENS``
of room, so that is a bound too. A text that fits is one part, exactly as before; otherwise
``app.text.split`` cuts it at sentence ends, then clauses, then words.

Each part is generated with the request's voice and sampling; its seed is derived from the request's
(``part_seed``), so a seeded request is reproducible part by part.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass

from app.core.constants import TOKENS_PER_SECOND
from app.text.duration import speech_seconds
from app.text.split import split_text

MIN_ROOM_TOKENS = 50
"""Fewest speech tokens (1 s) a prompt must leave in the LM window to be worth generating."""
SEED_BITS = 63  # the API's seed range, and vLLM's


def part_seed(seed: int | None, index: int) -> int | None:
    """The seed of part ``index``: the request's own for the first part (a text that fits one generation
    keeps its seed), for the others the first 63 bits of BLAKE2b-64 of ``"{seed}:{index}"``; None stays
    None (the backend draws one)."""
    if seed is None or index == 0:
        return seed
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - SEED_BITS)


@dataclass(frozen=True)
class Budget:
    """What one generation may hold: the LM window, the per-generation token bound, the speaking pace."""

    window: int
    max_tokens: int
    chars_per_s: float
    wide_chars_per_s: float

    def speech_codes(self, text: str) -> int:
        """The most codes ``text`` plausibly takes (50 per second of the slow-reader estimate)."""
        seconds = speech_seconds(text, self.chars_per_s, self.wide_chars_per_s)
        return math.ceil(seconds * TOKENS_PER_SECOND)


@dataclass(frozen=True)
class PartText:
    """One part's text, its prompt and the prompt's length in LM tokens."""

    text: str
    prompt: str
    prompt_tokens: int


def cut_into_parts(
    text: str, prompt_of: Callable[[str], str], count: Callable[[str], int], budget: Budget
) -> list[PartText]:
    """``text`` as parts that fit ``budget`` (one part when it fits whole). Blocking: ``count`` may run a
    tokenizer; a part whose prompt alone overfills the window is still returned (the caller refuses it)."""
    counted: dict[str, int] = {}

    def tokens(chunk: str) -> int:
        if chunk not in counted:
            counted[chunk] = count(prompt_of(chunk))
        return counted[chunk]

    def fits(chunk: str) -> bool:
        room = budget.window - tokens(chunk)
        return room >= MIN_ROOM_TOKENS and budget.speech_codes(chunk) <= min(budget.max_tokens, room)

    return [PartText(chunk, prompt_of(chunk), tokens(chunk)) for chunk in split_text(text, fits)]
