"""VoiceRegistry: voices users registered from a reference clip, kept as NeuCodec codes + transcript.

Each voice is one JSON file ``{VOICES_DIR}/{name}.json`` written atomically (a temp file in the same
directory, fsync, ``os.replace``), so a crash never leaves a half-written voice. All voices are read
at startup and served from memory; file IO runs in worker threads. Names are restricted to
``[A-Za-z0-9_-]{1,64}`` (safe as file names everywhere) and may not shadow a built-in voice or alias,
compared case-insensitively (so two names cannot collide on a case-insensitive file system).
One process owns a directory: other server processes see a new voice after their next restart.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from app.core.errors import Conflict, InvalidRequest, NotFound, echo
from app.lm.speech_tokens import SPEECH_CODES

log = logging.getLogger(__name__)

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
FILE_VERSION = 1


@dataclass(frozen=True)
class RegisteredVoice:
    """A registered voice: its transcript (normalized, as the LM sees it) and the clip's speech codes."""

    name: str
    reference_text: str
    codes: tuple[int, ...]
    created_at: int
    consent: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"version": FILE_VERSION, **asdict(self), "codes": list(self.codes)}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> RegisteredVoice:
        """Parse and check a stored voice; raises ValueError when it is malformed."""
        if data.get("version") != FILE_VERSION:
            raise ValueError(f"unknown version {data.get('version')!r}")
        name, text, codes = data.get("name"), data.get("reference_text"), data.get("codes")
        created, consent = data.get("created_at"), data.get("consent")
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise ValueError(f"bad name {name!r}")
        if not isinstance(text, str) or not text:
            raise ValueError("missing reference_text")
        if not isinstance(codes, list) or not codes:
            raise ValueError("missing codes")
        if not all(isinstance(c, int) and 0 <= c < SPEECH_CODES for c in codes):
            raise ValueError("codes out of range")
        if not isinstance(created, int) or (consent is not None and not isinstance(consent, str)):
            raise ValueError("bad created_at or consent")
        return cls(name, text, tuple(codes), created, consent)


def _write_atomic(path: Path, data: dict[str, object]) -> None:
    """Write ``data`` as JSON to ``path`` so that readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, separators=(",", ":"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_all(directory: Path) -> list[RegisteredVoice]:
    """Every valid voice file in ``directory`` (none if it does not exist); bad files are logged."""
    if not directory.is_dir():
        return []
    voices = []
    for path in sorted(directory.glob("*.json")):
        try:
            voice = RegisteredVoice.from_json(json.loads(path.read_text(encoding="utf-8")))
            if voice.name != path.stem:
                raise ValueError(f"holds voice {voice.name!r}")
        except (OSError, ValueError) as exc:
            log.warning("skipping voice file %s: %s", path, exc)
            continue
        voices.append(voice)
    return voices


class VoiceRegistry:
    """Registered voices of one server, backed by ``directory``; at most ``max_voices``."""

    def __init__(self, directory: Path, max_voices: int, reserved: Iterable[str]) -> None:
        self.directory = directory
        self.max_voices = max_voices
        self._reserved = {name.lower() for name in reserved}
        self._voices: dict[str, RegisteredVoice] = {}
        self._lock = asyncio.Lock()

    def reserve(self, names: Iterable[str]) -> None:
        """Also refuse these names (the built-in voices of a family added after construction)."""
        self._reserved.update(name.lower() for name in names)

    def __contains__(self, name: object) -> bool:
        return name in self._voices

    @property
    def voices(self) -> list[RegisteredVoice]:
        """Registered voices in name order."""
        return [self._voices[name] for name in sorted(self._voices)]

    def get(self, name: str) -> RegisteredVoice | None:
        return self._voices.get(name)

    async def load(self) -> None:
        """Read the directory (at startup). A file that names a built-in voice is skipped."""
        loaded = await asyncio.to_thread(_read_all, self.directory)
        for voice in loaded:
            if voice.name.lower() in self._reserved:
                log.warning("registered voice %r is shadowed by a built-in voice; ignored", voice.name)
                continue
            self._voices[voice.name] = voice
        log.info("%d registered voices loaded from %s", len(self._voices), self.directory)

    def check_name(self, name: str) -> None:
        """Raise InvalidRequest (bad name, limit reached) or Conflict (taken) before any work is done."""
        if not NAME_RE.match(name):
            raise InvalidRequest(
                "name: use 1-64 letters, digits, '_' or '-'", param="name", code="invalid_voice_name"
            )
        taken = {existing.lower() for existing in self._voices}
        if name.lower() in self._reserved or name.lower() in taken:
            raise Conflict(f"name: a voice called {name!r} already exists", param="name", code="voice_exists")
        if len(self._voices) >= self.max_voices:
            raise InvalidRequest(
                f"At most {self.max_voices} voices can be registered; delete one first.",
                param="name",
                code="voice_limit_reached",
            )

    async def add(
        self, name: str, reference_text: str, codes: list[int], consent: str | None
    ) -> RegisteredVoice:
        """Store a new voice (file first, then memory). Raises as ``check_name``."""
        async with self._lock:
            self.check_name(name)
            voice = RegisteredVoice(name, reference_text, tuple(codes), int(time.time()), consent)
            await asyncio.to_thread(_write_atomic, self.directory / f"{name}.json", voice.to_json())
            self._voices[name] = voice
            return voice

    async def remove(self, name: str) -> None:
        """Delete a registered voice; NotFound when there is none by that name."""
        async with self._lock:
            if name not in self._voices:
                raise NotFound(
                    f"No registered voice called {echo(name)}.", param="name", code="voice_not_found"
                )
            await asyncio.to_thread((self.directory / f"{name}.json").unlink, missing_ok=True)
            del self._voices[name]
