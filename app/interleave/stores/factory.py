"""The factory that builds the turn store ``INTERLEAVE_STORE`` names; no store imports it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from app.core.constants import TOKENS_PER_SECOND
from app.core.settings import ServerSettings
from app.interleave.stores.base import TurnStore

DIR_NAME = "tts-interleave"


def default_store_dir() -> Path:
    """``/dev/shm/tts-interleave`` where /dev/shm exists (memory-backed), else ``<tmp>/tts-interleave``."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    return base / DIR_NAME


def max_history_codes(settings: ServerSettings) -> int:
    """INTERLEAVE_MAX_S in speech codes (50 per second)."""
    return round(settings.INTERLEAVE_MAX_S * TOKENS_PER_SECOND)


def build_store(settings: ServerSettings) -> TurnStore | None:
    """The store ``INTERLEAVE_STORE`` names (None for off); nothing is opened before ``start``."""
    max_codes = max_history_codes(settings)
    ttl_s = settings.INTERLEAVE_TTL_S
    if settings.INTERLEAVE_STORE == "shm":
        from app.interleave.stores.shm import ShmStore

        directory = settings.INTERLEAVE_STORE_DIR
        return ShmStore(Path(directory) if directory else default_store_dir(), ttl_s, max_codes)
    if settings.INTERLEAVE_STORE == "redis":
        from app.interleave.stores.redis import RedisStore

        return RedisStore(
            settings.REDIS_URL, ttl_s, max_codes, prefix=f"{settings.REDIS_KEY_PREFIX}interleave:"
        )
    if settings.INTERLEAVE_STORE == "memory":
        from app.interleave.stores.memory import MemoryStore

        return MemoryStore(ttl_s, max_codes)
    return None
