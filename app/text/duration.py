"""How long a text may take to say, estimated on the long side: used to cut long inputs into generations.

Speech time grows with the written length, at a rate that depends on the script: spaced scripts
(Latin, Tamil, ...) are counted per code point (letters, marks, digits, spaces and punctuation alike, so
pauses are paid for), wide characters (CJK ideographs, kana, hangul, full-width marks) per character:

    seconds = spaced_chars / chars_per_s + wide_chars / wide_chars_per_s

The defaults (10 and 2.5 per second) are a slow reader's: read English runs at about 13-16 characters a
second (150 words a minute), Malay about the same, Tamil about 12-15 code points a second (a syllable
is one to three code points), Mandarin 4-5 characters a second with a pause at each full-width mark.
A text estimated at ``s`` seconds is therefore said in about 0.6-0.8 ``s``, so a part sized by this
estimate is not cut by ``max_tokens``. (espeak-ng, slower than most in Mandarin, stays within the
estimate in all four languages: ``tests/text/test_duration.py``.)
"""

from __future__ import annotations

import unicodedata

DEFAULT_CHARS_PER_S = 10.0
DEFAULT_WIDE_CHARS_PER_S = 2.5


def wide(char: str) -> bool:
    """True for a character of a script written without spaces (East Asian wide or full-width)."""
    return unicodedata.east_asian_width(char) in ("W", "F")


def speech_seconds(
    text: str, chars_per_s: float = DEFAULT_CHARS_PER_S, wide_chars_per_s: float = DEFAULT_WIDE_CHARS_PER_S
) -> float:
    """The longest plausible time, in seconds, to say ``text`` (see the module docstring)."""
    wide_chars = sum(1 for char in text if wide(char))
    return (len(text) - wide_chars) / chars_per_s + wide_chars / wide_chars_per_s
