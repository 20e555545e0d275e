"""Special-token markup out of every text that reaches a model: the first and last cleaning of the text front
end, whatever the family.

Anything in the caller's text that looks like a special token (``<|...|>``, the chat-template markup
of Qwen-style LMs) is removed, so input cannot open a turn, inject speech tokens or end the prompt.
"""

from __future__ import annotations

import re

SPECIAL_TOKEN = re.compile(r"<\|[^|<>]{0,64}\|>")
"""One ``<|...|>`` token."""
_SPACES = re.compile(r"\s+")


def clean_text(text: str) -> str:
    """``text`` without special-token markup, with whitespace collapsed to single spaces."""
    previous = None
    while previous != text:  # removal can join fragments into a new token: "<|im_<|x|>end|>"
        previous, text = text, SPECIAL_TOKEN.sub(" ", text)
    return _SPACES.sub(" ", text).strip()
