"""The rows MOSS-TTS-Realtime reads: system prompt, voice context, earlier turns, the assistant prefix.

Every row is ``[text_id, a1..a16]``; audio cells are 1024 (pad) unless stated. A job's prefill is, in order:

1. **System block**: the fixed system prompt, and with a reference the voice block
   ``<|im_start|>context\\nThe assistant section should be synthesized using the following voice
   timbre:`` + one ``<|audio_pad|>`` per reference frame + ``<|im_end|>\\n``, tokenized as one string.
   The rows holding ``<|audio_pad|>`` carry the reference frames in columns 1..16, one frame per row, in
   order. No reference transcript is used (the model never saw one).
2. **History turns** (earlier assistant turns of the same conversation, oldest first), each laid out
   exactly as the fine-tuning data lays out an assistant turn (upstream ``finetuning/dataset.py``):
   a prefix (``<|im_start|>assistant\\n`` for the first turn, ``<|im_end|>\\n<|im_start|>assistant\\n`` for
   later ones), the turn's ``L`` text ids, then ``<|text_pad|>`` rows; with ``D = min(L, 12)`` the BOS
   (1025) sits in column 1 of the row of text token ``D - 1``, frame ``k`` fills the row ``D + k`` after
   the prefix, and **an EOS row** follows the last frame (1026 in column 1, pads in 2..16), because
   every assistant turn the model was trained on ends with one, although upstream's streaming session
   never feeds its sampled EOS back. The text column is padded to cover the EOS row (``A + 13 - L`` pads
   for ``L >= 12``, ``A + 1`` for ``L < 12``). The conversations the server keeps have no user speech, so
   assistant turns follow one another; each still opens with ``<|im_end|>\\n<|im_start|>assistant\\n`` as
   a later turn does in training.
3. **The new turn**: the assistant prefix, then ``P = min(n, 12)`` rows of the text's first ids with
   the BOS in column 1 of the last of them. That last row's hidden state yields frame 0; step ``k >= 1``
   feeds ``[t_{P+k-1}, frame k-1]`` (``FrameJob.text_tail``), then ``<|text_pad|>`` once the text is
   used up, so frame ``k`` is fed beside ``t_{k+12}`` as in training. ``P`` never exceeds 12, also for
   short texts (upstream's session can, at the end of a text stream; training never does).

**Assistant prefix.** Upstream uses three variants. We use ``<|im_start|>assistant\\n`` directly after
the system block (the non-streaming inferencer's): it is the fine-tuning layout, where the first turn's
prefix has no leading ``<|im_end|>`` because the system block already ends with one. The doubled
``<|im_end|>\\n`` of the LLM-bridge example and the text-only user turn of the API server appear in no
training sample.

Special ids are looked up by string (``SpecialIds``); the user's text is tokenized with special tokens
split, so text that spells ``<|im_end|>`` cannot close a turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from app.families.moss.lm.feed import TextFeed
from app.families.moss.lm.types import (
    AUDIO_BOS,
    AUDIO_EOS,
    AUDIO_PAD,
    CODE_VALUES,
    CODEBOOKS,
    COLUMNS,
    DELAY,
    FrameJob,
    FrameSampling,
    SpecialIds,
    Turn,
)

SYSTEM_PROMPT = (
    "<|im_start|>system\n"
    "You are a highly expressive text-to-speech (TTS) engine developed by Mosi Intelligence. \n"
    "You possess natural language understanding, emotional modeling, and multi-style speech generation "
    "capabilities, allowing you to generate the corresponding speech based on the text given in the "
    "assistant."
    "<|im_end|>\n"
)
VOICE_INTRO = (
    "<|im_start|>context\nThe assistant section should be synthesized using the following voice timbre:"
)
DEFAULT_SAMPLING = FrameSampling()
FIRST_PREFIX = "<|im_start|>assistant\n"
LATER_PREFIX = "<|im_end|>\n<|im_start|>assistant\n"


def check_frames(frames: np.ndarray, what: str) -> np.ndarray:
    """``frames`` as (F, 16) int64 codes 0..1023, or ValueError naming ``what``."""
    array = np.asarray(frames)
    if array.ndim != 2 or array.shape[1] != CODEBOOKS or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{what} must be an (F, {CODEBOOKS}) integer array, got {array.dtype} {array.shape}")
    if array.size and (array.min() < 0 or array.max() >= CODE_VALUES):
        raise ValueError(f"{what} holds codes outside 0..{CODE_VALUES - 1}")
    return array.astype(np.int64)


def text_rows(ids: Sequence[int]) -> np.ndarray:
    """Rows with ``ids`` in the text column and pad audio: (len(ids), 17)."""
    rows = np.full((len(ids), COLUMNS), AUDIO_PAD, dtype=np.int64)
    rows[:, 0] = ids
    return rows


class MossPrompter:
    """Builds ``FrameJob``s from text, reference codes and history (layout: the module docstring)."""

    def __init__(self, tokenizer: Any, ids: SpecialIds) -> None:
        self.tokenizer = tokenizer
        self.ids = ids
        self._system = text_rows(self._encode(SYSTEM_PROMPT))
        self._first = self._encode(FIRST_PREFIX)
        self._later = self._encode(LATER_PREFIX)

    def _encode(self, text: str, split_special: bool = False) -> list[int]:
        encoded = self.tokenizer(text, add_special_tokens=False, split_special_tokens=split_special)
        return [int(i) for i in encoded["input_ids"]]

    def text_ids(self, text: str) -> tuple[int, ...]:
        """The ids a ``Turn`` stores for ``text`` (special-token spellings split into plain text)."""
        return tuple(self._encode(text, split_special=True))

    def system_rows(self, reference: np.ndarray | None) -> np.ndarray:
        """The system block, with the voice block and its reference frames when given: (S, 17)."""
        if reference is None:
            return self._system.copy()
        frames = check_frames(reference, "reference")
        if len(frames) == 0:
            raise ValueError("reference has no frames")
        voice = VOICE_INTRO + "<|audio_pad|>" * len(frames) + "<|im_end|>\n"
        rows = text_rows(self._encode(SYSTEM_PROMPT + voice))
        where = np.flatnonzero(rows[:, 0] == self.ids.audio_pad)
        if len(where) != len(frames) or where[-1] - where[0] + 1 != len(frames):
            raise ValueError(
                f"the tokenizer split the voice block into {len(where)} audio rows, not {len(frames)}"
            )
        rows[where[0] : where[-1] + 1, 1:] = frames
        return rows

    def turn_rows(self, turn: Turn, first: bool) -> np.ndarray:
        """A finished assistant turn as trained: prefix, text, BOS, its frames, the EOS row (see above)."""
        frames = check_frames(turn.frames, "history frames")
        prefix = self._first if first else self._later
        text = list(turn.text_ids)
        if not text:
            raise ValueError("a history turn has no text ids")
        start = len(prefix)
        lead = min(len(text), DELAY)
        length = max(len(text), lead + len(frames) + 1)
        rows = text_rows(prefix + text + [self.ids.text_pad] * (length - len(text)))
        rows[start + lead - 1, 1] = AUDIO_BOS
        rows[start + lead : start + lead + len(frames), 1:] = frames
        rows[start + lead + len(frames), 1] = AUDIO_EOS
        return rows

    def job(
        self,
        text: str,
        *,
        reference: np.ndarray | None,
        history: Sequence[Turn] = (),
        sampling: FrameSampling = DEFAULT_SAMPLING,
        max_frames: int,
    ) -> FrameJob:
        """The job speaking ``text`` in the voice of ``reference`` after ``history``."""
        ids = list(self.text_ids(text))
        if not ids:
            raise ValueError("the text has no tokens")
        return self.ids_job(
            ids, reference=reference, history=history, sampling=sampling, max_frames=max_frames
        )

    def ids_job(
        self,
        ids: Sequence[int],
        *,
        reference: np.ndarray | None,
        history: Sequence[Turn] = (),
        sampling: FrameSampling = DEFAULT_SAMPLING,
        max_frames: int,
        feed: TextFeed | None = None,
    ) -> FrameJob:
        """The job speaking the text ids ``ids`` (``text_ids`` of a text). With a ``feed`` (a streamed
        text: ``ids`` are the ones arrived so far, at least ``DELAY`` unless it has ended), the prefill
        holds the first ``min(len(ids), DELAY)`` and the steps read the rest from the feed."""
        if max_frames < 1:
            raise ValueError("max_frames must be at least 1")
        if not ids:
            raise ValueError("the text has no tokens")
        parts = [self.system_rows(reference)]
        parts += [self.turn_rows(turn, first=i == 0) for i, turn in enumerate(history)]
        lead = min(len(ids), DELAY)
        new = text_rows((self._later if history else self._first) + list(ids[:lead]))
        new[-1, 1] = AUDIO_BOS
        parts.append(new)
        return FrameJob(
            prefill=np.concatenate(parts),
            text_tail=() if feed is not None else tuple(ids[lead:]),
            sampling=sampling,
            max_frames=max_frames,
            feed=feed,
            feed_from=lead,
        )
