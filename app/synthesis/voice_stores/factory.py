"""The factory that builds the stores ``VOICE_STORE`` names (voices and lexicons); no store imports it."""

from __future__ import annotations

from pathlib import Path

from app.core.settings import ServerSettings
from app.synthesis.lexicons import RegisteredLexicon
from app.synthesis.registry import RecordStore, VoiceStore


def build_voice_store(settings: ServerSettings) -> VoiceStore:
    """Files in VOICES_DIR (one host) or Redis at REDIS_URL (every replica); opened by ``start``."""
    if settings.VOICE_STORE == "redis":
        from app.synthesis.voice_stores.redis import RedisVoiceStore

        return RedisVoiceStore(settings.REDIS_URL, settings.REDIS_KEY_PREFIX)
    from app.synthesis.voice_stores.file import FileVoiceStore

    return FileVoiceStore(Path(settings.VOICES_DIR))


def build_lexicon_store(settings: ServerSettings) -> RecordStore[RegisteredLexicon]:
    """Registered lexicons beside the voices: files in LEXICONS_DIR (default VOICES_DIR/lexicons), or the
    Redis hash ``<prefix>lexicons``."""
    if settings.VOICE_STORE == "redis":
        from app.synthesis.voice_stores.redis import RedisRecordStore

        return RedisRecordStore(
            settings.REDIS_URL, settings.REDIS_KEY_PREFIX, "lexicons", RegisteredLexicon.from_json
        )
    from app.synthesis.voice_stores.file import FileRecordStore

    directory = (
        Path(settings.LEXICONS_DIR) if settings.LEXICONS_DIR else Path(settings.VOICES_DIR) / "lexicons"
    )
    return FileRecordStore(directory, RegisteredLexicon.from_json)
