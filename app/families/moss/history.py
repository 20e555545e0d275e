"""Multi-turn context for the family: its finished turns in the shared interleave turn store.

A MOSS turn is kept as an ordinary stored turn (``app.interleave.turns.Turn``): the voice prefixed with
``moss:`` (so a NeuCodec history on the same id reads as another voice, and starts cold, and the other
way round), the normalized text, and the frames flattened frame by frame (16 codes each, 0..1023) at
200 codes per second (12.5 frames x 16), which the stores weigh as seconds against INTERLEAVE_MAX_S like
any turn. So every store (shm, redis, memory), the retention rules, TTLs and ``GET/DELETE
/v1/interleave/{id}`` work unchanged. The text's ids are not stored: the prompter gives them again from
the text (``Prompter.text_ids``), which is what they were made from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from app.families.moss.lm.types import Turn
from app.interleave.turns import Turn as StoredTurn
from app.interleave.turns import trailing_run

CODEBOOKS = 16
CODE_VALUES = 1024
CODES_PER_SECOND = 200
"""Stored codes per second of speech: 16 codebooks x 12.5 frames."""
VOICE_PREFIX = "moss:"


def stored_voice(voice: str) -> str:
    """The voice as the store keeps it for this family."""
    return VOICE_PREFIX + voice


def record(voice: str, text: str, frames: np.ndarray) -> StoredTurn:
    """A finished turn, frames ``(F, 16)``, as the store keeps it."""
    return StoredTurn(stored_voice(voice), text, tuple(int(c) for c in frames.reshape(-1)), CODES_PER_SECOND)


def turns(
    stored: Sequence[StoredTurn], voice: str, keep: int, text_ids: Callable[[str], tuple[int, ...]]
) -> list[Turn]:
    """The history of a request in ``voice``: the newest stored turns in that voice (a switch of voice or
    family starts cold), at most ``keep`` (0 = all), oldest first. A turn that is not a whole number of
    frames of valid codes ends the history there (it and older turns are left out)."""
    run = trailing_run(stored, stored_voice(voice))
    if keep:
        run = run[-keep:]
    history: list[Turn] = []
    for item in reversed(run):
        codes = np.asarray(item.codes, dtype=np.int64)
        if item.codes_per_second != CODES_PER_SECOND or codes.size % CODEBOOKS or codes.max() >= CODE_VALUES:
            break
        history.append(Turn(text_ids(item.text), codes.reshape(-1, CODEBOOKS)))
    history.reverse()
    return history
