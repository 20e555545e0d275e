"""The turn store contract, and the factory that builds the one ``INTERLEAVE_STORE`` names.

Every store keys an id by ``ids.digest(id)``, keeps the turns ``turns.retain`` selects after each
append, forgets an id ``ttl_s`` seconds after its last append, and reads what it cannot parse as an
empty history. Backend failures raise ``StoreError``; the caller decides whether a request goes on.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from app.audio.constants import TOKENS_PER_SECOND
from app.config import Settings
from app.interleave.turns import Turn

DIR_NAME = "tts-interleave"


class StoreError(Exception):
    """The store's backend failed (I/O error, Redis unreachable)."""


@dataclass(frozen=True)
class History:
    """The turns of one id, oldest first, and the seconds until it expires (None when empty)."""

    turns: list[Turn] = field(default_factory=list)
    expires_in_s: float | None = None


class TurnStore(Protocol):
    """Turn history per interleave id."""

    name: str

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def load(self, interleave_id: str) -> History: ...

    async def append(self, interleave_id: str, turn: Turn, keep: int) -> None:
        """Add ``turn`` after the id's turns, keep ``retain(turns, keep, max_codes)``, renew the TTL."""
        ...

    async def delete(self, interleave_id: str) -> bool:
        """Forget the id now; True when it had (unexpired) turns."""
        ...


def default_store_dir() -> Path:
    """``/dev/shm/tts-interleave`` where /dev/shm exists (memory-backed), else ``<tmp>/tts-interleave``."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    return base / DIR_NAME


def max_history_codes(settings: Settings) -> int:
    """INTERLEAVE_MAX_S in speech codes (50 per second)."""
    return round(settings.INTERLEAVE_MAX_S * TOKENS_PER_SECOND)


def build_store(settings: Settings) -> TurnStore | None:
    """The store ``INTERLEAVE_STORE`` names (None for off); nothing is opened before ``start``."""
    max_codes = max_history_codes(settings)
    ttl_s = settings.INTERLEAVE_TTL_S
    if settings.INTERLEAVE_STORE == "shm":
        from app.interleave.shm import ShmStore

        directory = settings.INTERLEAVE_STORE_DIR
        return ShmStore(Path(directory) if directory else default_store_dir(), ttl_s, max_codes)
    if settings.INTERLEAVE_STORE == "redis":
        from app.interleave.redis_store import RedisStore

        return RedisStore(settings.REDIS_URL, ttl_s, max_codes)
    if settings.INTERLEAVE_STORE == "memory":
        from app.interleave.memory import MemoryStore

        return MemoryStore(ttl_s, max_codes)
    return None
