"""Long inputs, for every family: a text cut into parts that one generation each can speak.

A family counts a generation in its own units (NeuCodec: speech codes, 50 per second; MOSS: frames,
12.5 per second). A part fits when its estimated speech time (``app.text.duration.speech_seconds``, a
slow reader's pace) in those units exceeds neither the per-generation bound (``max_tokens``) nor the
room its prompt leaves in the model's window, and that room is at least ``Budget.min_room``. A text that
fits is one part, exactly as before; otherwise ``app.text.split`` cuts it at sentence ends, then clauses,
then words. The family says what a part's prompt is (``prompt_of``) and how much room it leaves
(``room``); a part whose prompt alone leaves too little is still returned (the family refuses it).

Each part is generated with the request's voice and sampling; its seed is derived from the request's
(``part_seed``), so a seeded request is reproducible part by part.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from app.text.duration import speech_seconds
from app.text.split import split_text

SEED_BITS = 63  # the API's seed range, and vLLM's

P = TypeVar("P")


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
    """What one generation may hold, in the family's units: the per-generation bound, the fewest units a
    prompt must leave to be worth generating, the units per second of speech, the speaking pace."""

    max_units: int
    min_room: int
    units_per_s: float
    chars_per_s: float
    wide_chars_per_s: float

    def speech_units(self, text: str) -> int:
        """The most units ``text`` plausibly takes (``units_per_s`` per second of the slow estimate)."""
        seconds = speech_seconds(text, self.chars_per_s, self.wide_chars_per_s)
        return math.ceil(seconds * self.units_per_s)


@dataclass(frozen=True)
class Cut(Generic[P]):
    """One part's text and its prompt (whatever the family built with ``prompt_of``)."""

    text: str
    prompt: P


def cut_into_parts(
    text: str, prompt_of: Callable[[str], P], room: Callable[[P], int], budget: Budget
) -> list[Cut[P]]:
    """``text`` as parts that fit ``budget`` (one part when it fits whole); ``room(prompt)`` is what the
    prompt leaves of the window, in the budget's units. Blocking: ``prompt_of`` may run a tokenizer; each
    candidate's prompt is built once."""
    built: dict[str, P] = {}

    def prompt(chunk: str) -> P:
        if chunk not in built:
            built[chunk] = prompt_of(chunk)
        return built[chunk]

    def fits(chunk: str) -> bool:
        left = room(prompt(chunk))
        return left >= budget.min_room and budget.speech_units(chunk) <= min(budget.max_units, left)

    return [Cut(chunk, prompt(chunk)) for chunk in split_text(text, fits)]
