"""Prompt building for the speech-token LM.

TTS prompt: ``<|im_start|>{voice}: {text}<|speech_start|>``. The LM continues with ``<|s_N|>`` speech
tokens and ends with ``<|im_end|>``. Voice-conversion prompt: the reference turn (its transcript and
speech tokens, no speaker prefix), then the new text:
``<|im_start|>{reference_text}<|speech_start|>{<|s_N|>...}<|im_end|><|im_start|>{text}<|speech_start|>``.

Anything in the caller's text that looks like a special token (``<|...|>``) is removed first, so
input cannot open a turn, inject speech tokens or end the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.lm.speech_tokens import format_speech_tokens

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


def vc_prompt(reference_text: str, reference_codes: Iterable[int], text: str) -> str:
    """The prompt that makes the LM speak ``text`` in the voice of the reference (texts already cleaned)."""
    reference = format_speech_tokens(reference_codes)
    return (
        f"<|im_start|>{reference_text}<|speech_start|>{reference}<|im_end|><|im_start|>{text}<|speech_start|>"
    )
