"""The turn record, its JSON form, and the rules that decide which turns of a history are kept.

A turn is one finished generation: the voice, the normalized text and the speech codes the LM produced
for it (NeuCodec: 50 per second; another family says how many of its codes make a second, e.g. MOSS's
16 codebooks x 12.5 frames = 200, and prefixes its voices with its name so that families never share a
history). Stores keep a list of turns per interleave id, oldest first.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from app.core.constants import CODE_VALUES, TOKENS_PER_SECOND


@dataclass(frozen=True)
class Turn:
    """One committed generation: ``codes`` are speech codes (0..65535), at least one, made at
    ``codes_per_second`` (NeuCodec's 50 unless the family says otherwise)."""

    voice: str
    text: str
    codes: tuple[int, ...]
    codes_per_second: int = TOKENS_PER_SECOND

    @property
    def seconds(self) -> float:
        """The turn's length in seconds of speech."""
        return len(self.codes) / self.codes_per_second

    @property
    def cost(self) -> float:
        """The turn's weight against the history cap, in NeuCodec codes (50 per second of speech)."""
        return self.seconds * TOKENS_PER_SECOND

    def to_json(self) -> str:
        """The turn as one JSON object (ASCII only, so any text round-trips); ``codes_per_second`` only
        when it is not NeuCodec's, so NeuCodec turns read the same as before it existed."""
        obj: dict[str, object] = {"voice": self.voice, "text": self.text, "codes": list(self.codes)}
        if self.codes_per_second != TOKENS_PER_SECOND:
            obj["codes_per_second"] = self.codes_per_second
        return json.dumps(obj)

    @classmethod
    def from_obj(cls, obj: object) -> Turn:
        """A turn from its decoded JSON object; ValueError when it is not a valid turn."""
        if not isinstance(obj, dict):
            raise ValueError("a turn is a JSON object")
        voice, text, codes = obj.get("voice"), obj.get("text"), obj.get("codes")
        rate = obj.get("codes_per_second", TOKENS_PER_SECOND)
        if not (isinstance(voice, str) and isinstance(text, str) and isinstance(codes, list) and codes):
            raise ValueError("a turn needs a voice, a text and at least one code")
        if not all(type(code) is int and 0 <= code < CODE_VALUES for code in codes):
            raise ValueError("turn codes must be integers in 0..65535")
        if type(rate) is not int or rate < 1:
            raise ValueError("codes_per_second must be a positive integer")
        return cls(voice, text, tuple(codes), rate)


def trailing_run(turns: Sequence[Turn], voice: str) -> list[Turn]:
    """The newest turns spoken in ``voice``, up to the newest turn in another voice (a switch starts cold)."""
    start = len(turns)
    while start > 0 and turns[start - 1].voice == voice:
        start -= 1
    return list(turns[start:])


def retain(turns: Sequence[Turn], keep: int, max_codes: int) -> list[Turn]:
    """The turns a store keeps after an append: the trailing run in the newest turn's voice, at most
    ``keep`` turns (0 = no turn limit), and no older turn once the newer ones hold ``max_codes`` codes
    (counted as ``Turn.cost``, 50 per second of speech; the turn that crosses the cap is kept whole: the
    prompt cuts it to its tail)."""
    if not turns:
        return []
    kept: list[Turn] = []
    codes = 0.0
    for turn in reversed(trailing_run(turns, turns[-1].voice)):
        if (keep and len(kept) >= keep) or codes >= max_codes:
            break
        kept.append(turn)
        codes += turn.cost
    kept.reverse()
    return kept


def unspaced(char: str) -> bool:
    """True for characters of scripts written without spaces between words (CJK: wide or full width)."""
    return unicodedata.east_asian_width(char) in ("W", "F")


def text_tail(text: str, fraction: float) -> str:
    """The last ``fraction`` (0..1] of ``text`` by characters, at least one character.

    In spaced scripts the cut moves forward to the next word start, so no word is split (unless the
    tail is a single word); between characters of unspaced scripts (CJK) any cut is a boundary.
    """
    count = max(1, math.ceil(len(text) * fraction))
    cut = len(text) - count
    if cut > 0 and not any(c.isspace() or unspaced(c) for c in text[cut - 1 : cut + 1]):
        space = next((i for i in range(cut, len(text)) if text[i].isspace()), -1)
        cut = space if space >= 0 else cut
    return text[cut:].strip() or text[-count:]


def cut_to_tail(turn: Turn, codes: int) -> Turn:
    """``turn`` with only its last ``codes`` codes (1 <= codes) and the matching tail of its text."""
    if codes >= len(turn.codes):
        return turn
    kept = turn.codes[len(turn.codes) - codes :]
    return Turn(turn.voice, text_tail(turn.text, codes / len(turn.codes)), kept, turn.codes_per_second)
