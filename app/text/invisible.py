"""Characters that are never read aloud: control characters and invisible format characters.

Text can carry characters a reader never sees: C0 and C1 controls (NUL, ESC, DEL, ...), format
characters (Unicode category Cf: zero-width spaces and joiners, bidi marks, embeddings and isolates,
the soft hyphen, tag characters that can hide text from a reader, the Arabic number signs) and the
other *default ignorable* code points (characters that render as nothing: variation selectors, the
combining grapheme joiner, Hangul fillers, which are letters by category). None has a sound; sent to
the LM they are tokens it never learned to speak. ``strip_invisible`` takes them out:

- a control (category Cc, except tab and the line breaks) or a surrogate code point (category Cs: JSON
  can escape half a pair, though the API refuses such strings) becomes a space, since it may stand
  between two words;
- a format or default-ignorable character is removed, since it sits inside words ("zero\\u200bwidth"
  reads "zerowidth").

Tab, ``\\n`` and ``\\r`` stay: they are whitespace, and line breaks separate blocks for the sanitizer.
The ranges are Unicode's Cf category and ``Default_Ignorable_Code_Point`` property (Unicode 17); a test
checks them against the Unicode database of the running Python and of the ``regex`` package.
"""

from __future__ import annotations

import re

__all__ = ["strip_invisible"]

_SPACE_LIKE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_IGNORABLE = re.compile(
    "["
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5"
    "\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
    "]"
)


def strip_invisible(text: str) -> str:
    """``text`` with controls and surrogates as spaces and invisible format characters removed."""
    if text.isascii():
        return _SPACE_LIKE.sub(" ", text)
    return _IGNORABLE.sub("", _SPACE_LIKE.sub(" ", text))
