"""The host-local turn store: one JSON file per id in a directory (by default in /dev/shm, i.e. memory).

Shared by every worker process of the host. Layout: ``<sha256(id)>.json`` holds ``{"turns": [...]}``
and its mtime is the time of the last append; ``<sha256(id)>.lock`` is the id's lock (``flock``), so
appends to one id serialize and appends to different ids never wait for each other. Writers replace the
data file atomically (temp file + ``os.replace``), so readers take no lock and always see a whole file.
Lock files are deleted only while held; a waiter that then finds its lock file unlinked starts over.

Ids never reach a path: only their hex digest does. The directory is created 0700 and must be a real
directory owned by this user. Expired ids are swept every ``sweep_interval_s``; only files with our
name patterns are ever removed. All file work runs in worker threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ParamSpec, TypeVar

from app.interleave.ids import digest
from app.interleave.stores.base import History, StoreError
from app.interleave.turns import Turn, retain

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

_KEY = re.compile(r"[0-9a-f]{64}")
MAX_SWEEP_INTERVAL_S = 60.0


class ShmStore:
    """Turns per id as files under ``directory``; ``clock`` (epoch seconds) stamps and ages them."""

    name = "shm"

    def __init__(
        self,
        directory: Path,
        ttl_s: float,
        max_codes: int,
        clock: Callable[[], float] = time.time,
        sweep_interval_s: float | None = None,
    ) -> None:
        self.directory = Path(directory)
        self._ttl_s = ttl_s
        self._max_codes = max_codes
        self._clock = clock
        self._sweep_interval_s = sweep_interval_s or min(MAX_SWEEP_INTERVAL_S, max(1.0, ttl_s / 4))
        self._sweeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the periodic sweep of expired ids (the directory is created on the first append)."""
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep_forever(), name="interleave-shm-sweep")

    async def close(self) -> None:
        """Stop the sweep; the files stay for the other workers."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None

    async def load(self, interleave_id: str) -> History:
        return await asyncio.to_thread(self._guarded, self._read, digest(interleave_id))

    async def append(self, interleave_id: str, turn: Turn, keep: int) -> None:
        await asyncio.to_thread(self._guarded, self._append, digest(interleave_id), turn, keep)

    async def delete(self, interleave_id: str) -> bool:
        return await asyncio.to_thread(self._guarded, self._delete, digest(interleave_id))

    async def sweep(self) -> int:
        """Remove expired ids (with their lock files) and stale temp files now; return how many."""
        return await asyncio.to_thread(self._guarded, self._sweep)

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_interval_s)
            try:
                await self.sweep()
            except StoreError as exc:
                log.warning("interleave store sweep failed: %s", exc)

    # --- blocking parts, run in worker threads ------------------------------------------------------

    @staticmethod
    def _guarded(work: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return work(*args, **kwargs)
        except OSError as exc:
            raise StoreError(f"interleave store I/O failed: {exc!r}") from exc

    def _data(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def _lock_path(self, key: str) -> Path:
        return self.directory / f"{key}.lock"

    def _ensure_dir(self) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(self.directory)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            raise StoreError(f"{self.directory} is not a directory owned by this user")

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        """Hold the id's lock: flock on its lock file, retried if the file was unlinked meanwhile."""
        path = self._lock_path(key)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                held, current = os.fstat(fd), os.stat(path, follow_symlinks=False)
                if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
                    break
            except FileNotFoundError:
                pass  # unlinked by a deleter while we waited: take the new file
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
        try:
            yield
        finally:
            os.close(fd)

    def _read(self, key: str) -> History:
        try:
            fd = os.open(self._data(key), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return History()
        with os.fdopen(fd, "rb") as file:
            age = self._clock() - os.fstat(fd).st_mtime
            if age >= self._ttl_s:
                return History()
            raw = file.read()
        try:
            data = json.loads(raw)
            turns = [Turn.from_obj(obj) for obj in data["turns"]]
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("interleave store file %s.json is corrupt (%s); read as empty", key[:12], exc)
            return History()
        return History(turns, self._ttl_s - age) if turns else History()

    def _write(self, key: str, turns: list[Turn]) -> None:
        payload = ('{"turns": [' + ", ".join(turn.to_json() for turn in turns) + "]}").encode("ascii")
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=f"{key}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(payload)
            now = self._clock()
            os.utime(tmp, (now, now))
            os.replace(tmp, self._data(key))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _append(self, key: str, turn: Turn, keep: int) -> None:
        self._ensure_dir()
        with self._locked(key):
            turns = self._read(key).turns
            self._write(key, retain([*turns, turn], keep, self._max_codes))

    def _delete(self, key: str) -> bool:
        if not self.directory.is_dir():
            return False
        with self._locked(key):
            existed = bool(self._read(key).turns)
            self._data(key).unlink(missing_ok=True)
            self._lock_path(key).unlink(missing_ok=True)  # while held: waiters see it and start over
        return existed

    def _sweep(self) -> int:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return 0
        now = self._clock()
        removed = 0
        for name in names:
            key, _, suffix = name.partition(".")
            if not _KEY.fullmatch(key):
                continue
            try:
                info = os.stat(self.directory / name, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if now - info.st_mtime < self._ttl_s:
                continue
            if suffix.endswith(".tmp"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.directory / name)
                    removed += 1
            elif suffix in ("json", "lock"):
                removed += self._expire(key)
        return removed

    def _expire(self, key: str) -> int:
        """Under the id's lock: remove its data file if expired (1, else 0), and its lock file if no data
        is left."""
        removed = 0
        with self._locked(key):
            data = self._data(key)
            with contextlib.suppress(FileNotFoundError):
                if self._clock() - os.stat(data, follow_symlinks=False).st_mtime >= self._ttl_s:
                    data.unlink()
                    removed = 1
            if not data.exists():
                self._lock_path(key).unlink(missing_ok=True)
        return removed
