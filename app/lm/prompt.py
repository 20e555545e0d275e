"""Prompt building for the speech-token LM.

TTS prompt: ``<|im_start|>{voice}: {text}<|speech_start|>``. The LM continues with ``<|s_N|>`` speech
tokens and ends with ``<|im_end|>``. Anything in the caller's text that looks like a special token
(``<|...|>``) is removed first, so input cannot open a turn, inject speech tokens or end the prompt.
"""

from __future__ import annotations

import re

_SPECIAL_TOKEN = re.compile(r"<\|[^|<>]{0,64}\|>")
_SPACES = re.compile(r"\s+")


def clean_text(text: str) -> str:
    """``text`` without special-token markup, with whitespace collapsed to single spaces."""
    previous = None
    while previous != text:  # removal can join fragments into a new token: "<|im_<|x|>end|>"
        previous, text = text, _SPECIAL_TOKEN.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


def tts_prompt(voice: str, text: str) -> str:
    """The prompt that makes the LM speak ``text`` (already cleaned) in ``voice`` (already resolved)."""
    return f"<|im_start|>{voice}: {text}<|speech_start|>"
