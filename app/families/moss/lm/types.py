"""What a MOSS-TTS-Realtime generation is made of: its sampling settings, its rows, its history turns; and
the precision a MOSS part runs in.

Rows are ``[text_id, a1..a16]`` int64 (one text token and one code per codebook, 17 columns). Audio cells
hold a code 0..1023 or one of the three specials below. Importing this module loads no model library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from app.families.moss.lm.feed import TextFeed

CODEBOOKS = 16
"""Codebooks per frame (the codec's first 16 quantizers) = output heads of the local transformer."""
COLUMNS = CODEBOOKS + 1
AUDIO_VOCAB = 1027
"""Classes per audio head and rows per audio embedding table: 1024 codes + pad + BOS + EOS."""
CODE_VALUES = 1024
AUDIO_PAD = 1024
AUDIO_BOS = 1025
AUDIO_EOS = 1026
DELAY = 12
"""Text tokens the text column leads the audio by (the processor's ``delay_tokens_len``)."""


@dataclass(frozen=True)
class FrameSampling:
    """Per-request sampling; the defaults are the seed's recommended ones."""

    temperature: float = 0.8  # 0 = greedy
    top_p: float = 0.6
    top_k: int = 30
    repetition_penalty: float = 1.1  # 1.0 = off
    repetition_window: int = 50  # past frames of the same codebook (this turn only)
    seed: int | None = None  # None = nondeterministic; else a per-request torch.Generator


@dataclass(frozen=True)
class Turn:
    """One finished assistant turn, kept for multi-turn context."""

    text_ids: tuple[int, ...]  # the assistant text's token ids as fed
    frames: np.ndarray  # (F, 16) int64, codes 0..1023, EOS frame not included


@dataclass(frozen=True)
class FrameJob:
    """One generation, fully built."""

    prefill: np.ndarray  # (T, 17) int64 rows [text_id, a1..a16]; its last row yields frame 0
    text_tail: tuple[int, ...]  # assistant text ids fed with steps 1, 2, ... then <|text_pad|>
    sampling: FrameSampling
    max_frames: int  # cap on frames yielded (the API's max_tokens counts frames)
    feed: TextFeed | None = None
    """Streamed text (a realtime turn): the text ids come from it, ``text_tail`` is unused, and the row
    parks while the id its next step needs has not arrived."""
    feed_from: int = 0
    """With a feed: the index of the id fed with step 1 (the ids before it are in the prefill)."""


@dataclass(frozen=True)
class SpecialIds:
    """Text-vocabulary ids the prompt rows need, looked up by their strings."""

    im_start: int  # <|im_start|>
    im_end: int  # <|im_end|>
    audio_pad: int  # <|audio_pad|>: one row per reference frame
    text_pad: int  # <|text_pad|>: the text column once the text is used up
    pad: int  # the tokenizer's pad token


@dataclass(frozen=True)
class Precision:
    """The dtype a MOSS part runs in and why it was chosen (``/ready`` and the startup log say it)."""

    dtype: str  # float32 | bfloat16 | float16
    reason: str
    slow: bool = False  # an explicit dtype this CPU can only emulate (logged as a warning)

    def detail(self) -> dict[str, object]:
        """What ``/ready`` shows about it."""
        return {"dtype": self.dtype, "reason": self.reason}
