"""Prompt building for the speech-token LM: the one place its prompt format is written.

TTS prompt: ``<|im_start|>{voice}: {text}<|speech_start|>``. The LM continues with ``<|s_N|>`` speech
tokens and ends with ``<|im_end|>``. Voice-conversion prompt: the reference turn (its transcript and
speech tokens, no speaker prefix), then the new text:
``<|im_start|>{reference_text}<|speech_start|>{<|s_N|>...}<|im_end|><|im_start|>{text}<|speech_start|>``.

Interleaved prompt: each past turn as
``<|im_start|>{voice}: {text}<|speech_start|>{<|s_a|><|s_b|>...}<|im_end|>``, then the plain TTS prompt,
so with no history the prompt is the plain one, byte for byte.

Anything in the caller's text that looks like a special token (``<|...|>``) is removed first, so
input cannot open a turn, inject speech tokens or end the prompt.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Protocol

from app.families.neucodec.speech_tokens import format_speech_tokens
from app.text.clean import SPECIAL_TOKEN

BYTES_PER_TOKEN_ESTIMATE = 3


class PastTurn(Protocol):
    """A turn already spoken: its voice, its text and its speech codes."""

    @property
    def voice(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def codes(self) -> Sequence[int]: ...


def tts_prompt(voice: str, text: str) -> str:
    """The prompt that makes the LM speak ``text`` (already cleaned) in ``voice`` (already resolved)."""
    return f"<|im_start|>{voice}: {text}<|speech_start|>"


def vc_prompt(reference_text: str, reference_codes: Iterable[int], text: str) -> str:
    """The prompt that makes the LM speak ``text`` in the voice of the reference (texts already cleaned)."""
    reference = format_speech_tokens(reference_codes)
    return (
        f"<|im_start|>{reference_text}<|speech_start|>{reference}<|im_end|><|im_start|>{text}<|speech_start|>"
    )


def history_prompt(history: Sequence[PastTurn], voice: str, text: str) -> str:
    """The prompt that speaks ``text`` in ``voice`` after the ``history`` turns (oldest first)."""
    turns = "".join(
        f"<|im_start|>{turn.voice}: {turn.text}<|speech_start|>{format_speech_tokens(turn.codes)}<|im_end|>"
        for turn in history
    )
    return turns + tts_prompt(voice, text)


def estimate_tokens(prompt: str) -> int:
    """An estimate of the LM tokens of ``prompt`` when neither a tokenizer nor the backend says.

    Every ``<|...|>`` token (speech tokens included) counts one, as in the model's vocabulary; the other
    text counts one token per 3 UTF-8 bytes, rounded up. Qwen's byte-level BPE averages about 4 bytes a
    token on English and 3 on CJK, so the estimate errs on the long side and the window is not overrun.
    """
    specials = len(SPECIAL_TOKEN.findall(prompt))
    text = SPECIAL_TOKEN.sub("", prompt).encode("utf-8", "surrogatepass")
    return specials + math.ceil(len(text) / BYTES_PER_TOKEN_ESTIMATE)
