"""Splitting a long text into chunks that one LM generation can speak.

``split_text(text, fits)`` cuts at sentence ends first, then at clause boundaries, then between words,
and packs the pieces greedily into the fewest in-order chunks for which ``fits(chunk)`` holds (the
caller decides: a character budget, or the speech tokens a chunk would need against ``max_tokens`` and
the LM window). A word is never cut: a single word longer than the budget becomes a chunk of its own.
Text without spaces between words (Chinese, Japanese) is cut between characters. Sentence and clause
marks include the CJK full-width ones (``。！？；，、：``); Tamil and Malay use the Latin marks.
Joining the chunks with single spaces (no space between CJK characters) gives back the text up to
whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Callable

CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*\s+|[。！？]+[”’」』）]*\s*")
CLAUSE_END = re.compile(r"[,;:]\s+|\s[—–-]\s+|[，；：、]\s*")
WORD = re.compile(rf"\s+|[{CJK}]\s*|[^{CJK}\s]+\s*")


def _cut(text: str, boundary: re.Pattern[str]) -> list[str]:
    """``text`` cut after every match of ``boundary``; the pieces concatenate back to ``text``."""
    pieces, start = [], 0
    for match in boundary.finditer(text):
        if match.end() > start:
            pieces.append(text[start : match.end()])
            start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _words(text: str) -> list[str]:
    """Words with their trailing whitespace; each CJK character is a word of its own."""
    return WORD.findall(text)


LEVELS: tuple[Callable[[str], list[str]], ...] = (
    lambda text: _cut(text, SENTENCE_END),
    lambda text: _cut(text, CLAUSE_END),
    _words,
)


def split_text(text: str, fits: Callable[[str], bool]) -> list[str]:
    """The chunks of ``text`` (stripped, non-empty, in order); see the module docstring."""
    return [chunk for chunk in _pack(text, fits, 0) if chunk]


def _pack(text: str, fits: Callable[[str], bool], level: int) -> list[str]:
    """Pack ``text``'s pieces at ``level`` greedily; a piece that does not fit alone goes a level down."""
    if fits(text.strip()) or level == len(LEVELS):
        return [text.strip()]
    chunks: list[str] = []
    current = ""
    for piece in LEVELS[level](text):
        if fits((current + piece).strip()):
            current += piece
            continue
        if current.strip():
            chunks.append(current.strip())
        current = ""
        if fits(piece.strip()):
            current = piece
            continue
        inner = _pack(piece, fits, level + 1) or [""]
        chunks += inner[:-1]
        current = inner[-1] + piece[len(piece.rstrip()) :]  # the last part may take the next pieces
    if current.strip():
        chunks.append(current.strip())
    return chunks
