"""The voice store of one host: one JSON file per voice in a directory, shared by the host's workers.

``{dir}/{name}.json`` holds a voice (written to a temp file, fsynced, then renamed into place, so a
reader sees a whole file or none). Changes take ``{dir}/.lock`` (``flock``, so every process on the
host serializes its adds and deletes) and then rewrite ``{dir}/.version`` with a fresh random token;
the store's version is that token plus the directory's mtime (which also moves when an operator copies
a file in by hand). Under the lock an add re-reads the directory, so a name taken by another worker
a moment earlier is a conflict and the limit counts every worker's voices, and a delete for an owner
reads the file's recorded owner before it unlinks the file. All file work runs in
worker threads. ``flock`` is per host: replicas on several hosts share voices through Redis instead.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import secrets
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Generic, TypeVar

from app.synthesis.registry import AddResult, R, RegisteredVoice, RemoveResult, VoiceStoreError

log = logging.getLogger(__name__)

T = TypeVar("T")

LOCK_NAME = ".lock"
VERSION_NAME = ".version"


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FileRecordStore(Generic[R]):
    """Records as files in ``directory`` (created on the first add), read back with ``parse``."""

    name = "file"

    def __init__(self, directory: Path, parse: Callable[[dict[str, object]], R]) -> None:
        self.directory = directory
        self.parse = parse

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def version(self) -> str:
        return await self._run(self._version)

    async def load(self) -> tuple[str, list[R]]:
        return await self._run(self._load)

    async def add(self, voice: R, max_voices: int) -> AddResult:
        return await self._run(self._add, voice, max_voices)

    async def remove(self, name: str, owner: str | None) -> RemoveResult:
        return await self._run(self._remove, name, owner)

    async def _run(self, work: Callable[..., T], *args: object) -> T:
        try:
            return await asyncio.to_thread(work, *args)
        except OSError as exc:
            raise VoiceStoreError(f"store directory {self.directory}: {exc!r}") from exc

    # --- blocking work (worker threads) ---------------------------------------------------------------
    def _version(self) -> str:
        try:
            mtime = self.directory.stat().st_mtime_ns
        except FileNotFoundError:
            return "absent"
        try:
            token = (self.directory / VERSION_NAME).read_text(encoding="ascii").strip()
        except FileNotFoundError:
            token = ""
        return f"{token}:{mtime}"

    def _files(self) -> dict[str, Path]:
        """Voice files by lowercased name (the directory may not exist yet)."""
        if not self.directory.is_dir():
            return {}
        return {path.stem.lower(): path for path in sorted(self.directory.glob("*.json"))}

    def _load(self) -> tuple[str, list[R]]:
        version = self._version()  # read before the files: a change in between is seen on the next use
        voices = []
        for path in self._files().values():
            try:
                voice = self.parse(json.loads(path.read_text(encoding="utf-8")))
                if voice.name != path.stem:
                    raise ValueError(f"holds voice {voice.name!r}")
            except (OSError, ValueError) as exc:
                log.warning("skipping record file %s: %s", path, exc)
                continue
            voices.append(voice)
        return version, voices

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The host-wide lock of this directory; bumps the version when the block changed something."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / LOCK_NAME, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _bump(self) -> None:
        _write_atomic(self.directory / VERSION_NAME, secrets.token_hex(8))

    def _add(self, voice: R, max_voices: int) -> AddResult:
        with self._locked():
            files = self._files()
            if voice.name.lower() in files:
                return "exists"
            if len(files) >= max_voices:
                return "full"
            data = json.dumps(voice.to_json(), separators=(",", ":"))
            _write_atomic(self.directory / f"{voice.name}.json", data)
            self._bump()
            return "added"

    def _remove(self, name: str, owner: str | None) -> RemoveResult:
        path = self.directory / f"{name}.json"
        if not path.exists():
            return "absent"
        with self._locked():
            try:
                if owner is not None and _owner_of(path) != owner:
                    return "not_owner"
                path.unlink()
            except FileNotFoundError:
                return "absent"
            self._bump()
            return "removed"


class FileVoiceStore(FileRecordStore[RegisteredVoice]):
    """Registered voices as files in ``directory``."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, RegisteredVoice.from_json)


def _owner_of(path: Path) -> object:
    """The owner a voice file records (None for none, or when the file is not a voice record)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    return record.get("owner") if isinstance(record, dict) else None
