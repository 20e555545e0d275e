"""The factory that builds the voice store ``VOICE_STORE`` names; no store imports it."""

from __future__ import annotations

from pathlib import Path

from app.core.settings import ServerSettings
from app.synthesis.registry import VoiceStore


def build_voice_store(settings: ServerSettings) -> VoiceStore:
    """Files in VOICES_DIR (one host) or Redis at REDIS_URL (every replica); opened by ``start``."""
    if settings.VOICE_STORE == "redis":
        from app.synthesis.voice_stores.redis import RedisVoiceStore

        return RedisVoiceStore(settings.REDIS_URL, settings.REDIS_KEY_PREFIX)
    from app.synthesis.voice_stores.file import FileVoiceStore

    return FileVoiceStore(Path(settings.VOICES_DIR))
