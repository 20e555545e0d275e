"""A text that arrives in deltas, cut into pieces that can be normalized on their own.

A piece ends at a sentence end, a clause end, or, in a long run without either, between two plain
words; only a cut that no later delta can move is made, so the pieces depend on the text alone, never
on how it was delivered (a text pushed whole gives the same pieces as the same text pushed one character
at a time). Each piece is normalized by itself, so a cut must not split what a normalizer reads as one
thing: a number (``3.5``, ``1,000``, ``$20``), a date, an amount with its unit, an abbreviation
with its name. Hence:

- **sentence end**: a word ending in ``.!?…`` (closing quotes and brackets after it allowed) followed
  by whitespace, unless the word looks like an abbreviation (one letter, a capitalized word of at
  most three letters: ``J.``, ``Dr.``, ``St.``, or one that comes before what it names: ``ext.``,
  ``tel.``, ``vs.``, ``approx.``, ``rs.``; these stay with what follows); CJK ``。！？`` end a
  sentence with or without whitespace once the next character has come;
- **clause end**: a word ending in ``,;:`` followed by whitespace (not a comma between numbers:
  ``Jan 5, 2024``, ``1, 2``; the number after it must have come), a lone dash between spaces (not
  between two words with digits, a range: ``9am - 5pm``, ``RM5 - RM10``; the word after it must have
  come), CJK ``，；：、``;
- **between plain words**: once the piece has ``word_chars`` characters, between two words made of
  letters only (no digit, symbol or dot), the second one complete (whitespace after it), so neither can
  belong to a number, a unit or an abbreviation; between two CJK ideographs likewise;
- a piece that reaches ``max_chars`` without any of these is cut at its last whitespace (or, with
  none, at ``max_chars``): text no normalizer reads as one thing anyway.

Whitespace between pieces is not part of either; ``Piece.spaced`` says whether there was some (so the
pieces' normalized texts join with a space, or without one between CJK pieces).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from app.text.split import CJK

Kind = Literal["sentence", "clause", "word", "end"]

WORD_CHARS = 12
MAX_CHARS = 300

_TOKEN = re.compile(rf"\s+|[{CJK}]|[^{CJK}\s]+")
_SENTENCE = re.compile(r"[.!?…]+[\"'”’)\]]*$")
_CLAUSE = re.compile(r"[,;:]$")
_ABBREVIATION = re.compile(r"^[\"'“‘(\[]*(?:\w|[A-Z][a-z]{0,2}|ext|tel|vs|approx|[Rr]s)\.$")
_DASHES = ("-", "–", "—")
_CJK_SENTENCE = "。！？"
_CJK_CLAUSE = "，；：、"
_CJK_CHAR = re.compile(rf"[{CJK}]")


@dataclass(frozen=True)
class Piece:
    """One piece of the text: its characters (no surrounding whitespace), what ended it, and whether
    whitespace stood between it and the piece before."""

    text: str
    kind: Kind
    spaced: bool = True


def _plain(word: str) -> bool:
    return word.isalpha() and not _CJK_CHAR.search(word)


def _has_digit(word: str) -> bool:
    return any(c.isdigit() for c in word)


def _ideograph(word: str) -> bool:
    return len(word) == 1 and word.isalpha() and bool(_CJK_CHAR.match(word))


class StreamSplitter:
    """``push`` deltas, ``end`` the text: the pieces of the module docstring, in order."""

    def __init__(self, word_chars: int = WORD_CHARS, max_chars: int = MAX_CHARS) -> None:
        self.word_chars = word_chars
        self.max_chars = max_chars
        self.pending = ""  # text not cut into pieces yet
        self.spaced = False  # whitespace came before ``pending`` (after the last piece)
        self.started = False

    def push(self, delta: str) -> list[Piece]:
        """The pieces that ``delta`` completes."""
        self.pending += delta
        pieces = []
        while (piece := self._next(final=False)) is not None:
            pieces.append(piece)
        return pieces

    def end(self) -> list[Piece]:
        """The pieces of what is left (the text has ended)."""
        pieces = []
        while (piece := self._next(final=True)) is not None:
            pieces.append(piece)
        return pieces

    def _emit(self, stop: int, resume: int, kind: Kind) -> Piece | None:
        text = self.pending[:stop].strip()
        rest = self.pending[resume:]
        gap = self.pending[stop:resume]
        spaced = self.spaced or not self.started
        self.pending = rest
        self.spaced = bool(gap.strip() == "" and gap)
        if not text:
            return None
        self.started = True
        return Piece(text, kind, spaced)

    def _next(self, final: bool) -> Piece | None:
        """The next piece of ``pending`` if a cut in it is certain (``final``: the text has ended)."""
        while True:
            lead = len(self.pending) - len(self.pending.lstrip())
            if lead:
                self.spaced = True
                self.pending = self.pending[lead:]
            if not self.pending:
                return None
            tokens = [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(self.pending)]
            cut = self._cut(tokens)
            if cut is not None:
                stop, resume, kind = cut
                piece = self._emit(stop, resume, kind)
                if piece is not None:
                    return piece
                continue
            if final:
                return self._emit(len(self.pending), len(self.pending), "end")
            return None

    def _cut(self, tokens: list[tuple[int, int, str]]) -> tuple[int, int, Kind] | None:
        """(end of the piece, start of what follows, kind) of the first certain cut, or None."""
        last_space: tuple[int, int] | None = None
        for i, (start, end, token) in enumerate(tokens):
            after = tokens[i + 1] if i + 1 < len(tokens) else None
            if token.isspace():
                last_space = (start, end)
                continue
            if (
                _ideograph(token)
                or token in _CJK_SENTENCE
                or token in _CJK_CLAUSE
                or token[-1] in _CJK_SENTENCE
            ):
                cut = self._cjk_cut(tokens, i)
                if cut is not None:
                    return cut
            spaced = after is not None and after[2].isspace()
            if spaced and after is not None:
                if _SENTENCE.search(token) and not _ABBREVIATION.match(token):
                    return end, after[1], "sentence"
                following = tokens[i + 2] if i + 2 < len(tokens) else None
                numbers = (
                    len(token) > 1
                    and token[-2].isdigit()
                    and (following is None or following[2][0].isdigit())
                )
                dash = token in _DASHES and i > 0 and tokens[i - 1][2].isspace()
                if dash and i >= 2 and _has_digit(tokens[i - 2][2]):  # "9am - 5pm" if a number follows
                    if following is None or (not _has_digit(following[2]) and i + 3 >= len(tokens)):
                        return None  # the word after the dash decides
                    dash = not _has_digit(following[2])
                if (_CLAUSE.search(token) and not numbers) or dash:
                    return end, after[1], "clause"
                if (
                    end >= self.word_chars
                    and _plain(token)
                    and following is not None
                    and _plain(following[2])
                    and i + 3 < len(tokens)
                    and tokens[i + 3][2].isspace()
                ):
                    return end, after[1], "word"
            if end >= self.max_chars:
                if last_space is not None:
                    return last_space[0], last_space[1], "word"
                return self.max_chars, self.max_chars, "word"
        return None

    def _cjk_cut(self, tokens: list[tuple[int, int, str]], i: int) -> tuple[int, int, Kind] | None:
        """A cut after CJK token ``i``: a full-width sentence or clause mark (the next character has
        come), or between two ideographs in a long piece."""
        _, end, token = tokens[i]
        if i + 1 >= len(tokens):
            return None
        after = tokens[i + 1]
        resume = tokens[i + 2][0] if after[2].isspace() and i + 2 < len(tokens) else after[0]
        if after[2].isspace() and i + 2 >= len(tokens):
            return None  # only whitespace after it so far: a closing mark may still come
        if token[-1] in _CJK_SENTENCE and after[2][0] not in "”’」』）":
            return end, resume, "sentence"
        if token in _CJK_CLAUSE:
            return end, resume, "clause"
        if end >= self.word_chars and _ideograph(token) and _ideograph(after[2]) and i + 2 < len(tokens):
            return end, after[0], "word"
        return None
