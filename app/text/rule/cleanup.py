"""Light cleanup of sanitized text: quotes, dashes, ellipses, repeated punctuation, stray symbols.

Careful regexes, applied in order. What it keeps matters as much as what it changes:

- sentence punctuation stays (``!`` is not turned into ``,``; no ``.`` is appended);
- hyphens inside words stay (``kanak-kanak``, ``e-mail``, ``ke-3``), and so do hyphens and dashes
  between numbers, which become ``-`` so the verbalizer reads a range (``3–5`` -> ``3-5``);
- symbols that carry meaning for the verbalizer stay: ``% $ @ / # & + = < > ~`` before a digit,
  ``*`` and ``^`` between numbers, parentheses and straight quotes.

What changes: curly and angle quotes become straight ones; ``…`` and runs of dots become ``...``
(two dots become one); a dash between words (em or en dash, ``--``, a spaced hyphen) becomes a
comma pause; ``!!!``, ``??`` and ``?!`` become one mark; ``|`` and bullets become commas; emoji,
arrows, ``* ^ \\ { } [ ] ` ~`` and ``_`` outside words become spaces, never merging words; spaces
before punctuation go; whitespace is collapsed.
"""

from __future__ import annotations

import re

__all__ = ["cleanup"]

_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‟": '"', "«": '"', "»": '"', "〝": '"', "〞": '"'})
_APOSTROPHES = str.maketrans({"‘": "'", "’": "'", "‚": "'", "‛": "'"})

_DOTS = re.compile(r"…+|\.(?:[ \t]?\.)+")
_CJK_REPEAT = re.compile(r"([。，、；：])\1+")
_DASH = re.compile(r"[ \t]*(?:[–—―]+|-{2,})[ \t]*|[ \t]+-[ \t]+")
_DIGIT = re.compile(r"\d")
_QUESTION_BANG = re.compile(r"[?!]{2,}")
_FULL_QUESTION_BANG = re.compile(r"[？！]{2,}")
_REPEATED_COMMA = re.compile(r"([,;])\1+")
_SEPARATOR = re.compile(r"\s*[|•◦▪▫●○■□►▶▸‣⁃]\s*")
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\u2190-\u21ff\ufe0e\ufe0f\U000e0020-\U000e007f]+"
    "(?:\u200d[\U0001f000-\U0001faff\u2600-\u27bf\ufe0f]+)*"
)
_STRAY = re.compile(r"[\\{}\[\]`]|~(?!\d)|(?<!\w)_+|_+(?!\w)")
_OPERATOR = re.compile(r"[*^]+")
_SPACE_BEFORE_MARK = re.compile(r"\s+(?=[,!?;:。，！？；：、]|\.(?:\s|$))")
_COMMA_AFTER_MARK = re.compile(r"(?<=[.!?;:,。！？；：，、])(?:\s*,)+")
_COMMA_BEFORE_STOP = re.compile(r"[,;:]+\s*(?=[!?]|\.(?!\d))")
_SPACE = re.compile(r"\s+")
_CONTEXT = 64  # characters either side a callback looks at (bounded, so long texts stay linear)
_LEADING_COMMAS = re.compile(r"^[\s,]+")


def cleanup(text: str) -> str:
    """Tidy punctuation and symbols of already sanitized ``text``; see the module docstring."""
    text = text.translate(_QUOTES).translate(_APOSTROPHES)
    text = _DOTS.sub(_dots, text)
    text = _CJK_REPEAT.sub(r"\1", text)
    text = _DASH.sub(_dash, text)
    text = _QUESTION_BANG.sub(lambda match: "?" if "?" in match.group() else "!", text)
    text = _FULL_QUESTION_BANG.sub(lambda match: "？" if "？" in match.group() else "！", text)
    text = _REPEATED_COMMA.sub(r"\1", text)
    text = _SEPARATOR.sub(", ", text)
    text = _EMOJI.sub(" ", text)
    text = _STRAY.sub(" ", text)
    text = _OPERATOR.sub(_operator, text)
    text = _SPACE.sub(" ", text)
    text = _SPACE_BEFORE_MARK.sub("", text)
    text = _COMMA_AFTER_MARK.sub("", text)
    text = _COMMA_BEFORE_STOP.sub("", text)
    return _LEADING_COMMAS.sub("", text).rstrip()


def _dots(match: re.Match[str]) -> str:
    """``...`` for an ellipsis or three or more dots, ``.`` for two."""
    found = match.group()
    return "..." if "…" in found or found.count(".") >= 3 else "."


def _dash(match: re.Match[str]) -> str:
    """``-`` between two tokens with digits (a range) or inside a word (en dash); else a comma pause."""
    start, end = match.span()
    before = match.string[max(0, start - _CONTEXT) : start].rsplit(None, 1)
    after = match.string[end : end + _CONTEXT].split(None, 1)
    if before and after and _DIGIT.search(before[-1]) and _DIGIT.search(after[0]):
        return "-"
    if match.group() == "–" and before and after and before[-1][-1].isalnum() and after[0][0].isalnum():
        return "-"
    return ", "


def _operator(match: re.Match[str]) -> str:
    """``*`` and ``^`` between two numbers stay (arithmetic); elsewhere they are markup left over."""
    start, end = match.span()
    left = match.string[max(0, start - _CONTEXT) : start].rstrip()
    right = match.string[end : end + _CONTEXT].lstrip()
    return match.group() if left[-1:].isdigit() and right[:1].isdigit() else " "
