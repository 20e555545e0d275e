"""Whether a normalized text has anything to speak: at least one letter or digit.

Input made only of whitespace, control characters (``"\\u0000"``, C0/C1), zero-width or other
invisible format characters, punctuation, symbols or emoji has nothing a voice can say; sent to the
LM it produces noise or nothing. Such input is refused before any audio (400, ``param`` naming the
field): the request is well-formed (its schema is satisfied, which is what a 422 reports) but cannot
be served, like an unknown voice.
"""

from __future__ import annotations

import unicodedata

from app.core.errors import InvalidRequest


def is_speakable(text: str) -> bool:
    """True when ``text`` holds a letter or a digit (a Unicode category L* or N* character)."""
    return any(unicodedata.category(char)[0] in "LN" for char in text)


def require_speakable(text: str, param: str) -> None:
    """InvalidRequest (400, code ``no_speakable_text``) unless ``text`` has something to speak."""
    if not is_speakable(text):
        raise InvalidRequest(
            f"{param}: nothing speakable (no letter or digit) after normalization",
            param=param,
            code="no_speakable_text",
        )
