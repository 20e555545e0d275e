"""Encoded references shared between processes, by content digest: in Redis (every replica) or in files
(the workers of one host).

Both keep at most ``capacity`` (REFERENCE_CACHE_SIZE) references, the least recently used removed first.
``RedisSharedCodes``: the hash ``<prefix>codes`` (digest -> the codes as JSON) and the sorted set
``<prefix>used`` (digest -> last use, Redis' clock in ms); a lookup and a store are each one Lua script
(check the age, touch; store, then drop what is older than the TTL and the least recently used beyond
``capacity``), and both keys expire ``ttl_s`` after the last use, so an idle cache leaves nothing
behind. ``FileSharedCodes``: ``<dir>/<digest>.codes`` (JSON, written to a temp file and renamed),
the least recently used by mtime (touched on a hit).

Both are best effort, as a cache should be: a failure makes a lookup a miss and a put a no-op (logged).
After a Redis failure the store is skipped for ``BACKOFF_S``, so voice conversion does not pay Redis'
timeouts on every request while it is down.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import tempfile
import time
from pathlib import Path

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from app.core.settings import ServerSettings

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 0.5
COMMAND_TIMEOUT_S = 1.0
BACKOFF_S = 5.0
DIGEST_RE = re.compile(r"[0-9a-f]{16,128}")


def _parse(value: str | bytes) -> list[int] | None:
    """Stored codes, or None when they do not parse as a non-empty list of ints."""
    try:
        codes = json.loads(value)
    except ValueError:
        return None
    if not isinstance(codes, list) or not codes or not all(isinstance(c, int) for c in codes):
        return None
    return codes


# KEYS: the hash, the sorted set. ARGV: digest, TTL in ms. The codes, or nil (none, or older than the TTL).
_GET = """
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
local used = redis.call('ZSCORE', KEYS[2], ARGV[1])
local codes = redis.call('HGET', KEYS[1], ARGV[1])
if not used or not codes or now - tonumber(used) > tonumber(ARGV[2]) then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  return false
end
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return codes
"""

# KEYS: the hash, the sorted set. ARGV: digest, codes JSON, TTL in ms, capacity.
_PUT = """
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[1])
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[3]))
local extra = redis.call('ZCARD', KEYS[2]) - #gone - tonumber(ARGV[4])
if extra > 0 then
  for _, digest in ipairs(redis.call('ZRANGE', KEYS[2], #gone, #gone + extra - 1)) do
    table.insert(gone, digest)
  end
end
for _, digest in ipairs(gone) do
  redis.call('HDEL', KEYS[1], digest)
  redis.call('ZREM', KEYS[2], digest)
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return #gone
"""


class RedisSharedCodes:
    """Reference codes in Redis at ``url`` under ``prefix`` (one family's): at most ``capacity``, each kept
    ``ttl_s`` after its last use."""

    def __init__(self, url: str, prefix: str, ttl_s: float, capacity: int) -> None:
        self.url = url
        self.prefix = prefix
        self.keys = [prefix + "codes", prefix + "used"]
        self.capacity = capacity
        self._ttl_ms = max(1, math.ceil(ttl_s * 1000))
        self._client: Redis | None = None
        self._get: AsyncScript | None = None
        self._put: AsyncScript | None = None
        self._skip_until = 0.0

    async def start(self) -> None:
        if self._client is None:
            self._client = Redis.from_url(
                self.url,
                socket_connect_timeout=CONNECT_TIMEOUT_S,
                socket_timeout=COMMAND_TIMEOUT_S,
                retry=Retry(NoBackoff(), 1),
            )
            self._get = self._client.register_script(_GET)
            self._put = self._client.register_script(_PUT)

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    def _usable(self) -> Redis | None:
        return self._client if time.monotonic() >= self._skip_until else None

    def _failed(self, exc: BaseException) -> None:
        self._skip_until = time.monotonic() + BACKOFF_S
        log.warning("shared reference codes unavailable for %.0f s: %r", BACKOFF_S, exc)

    async def get(self, digest: str) -> list[int] | None:
        if self._usable() is None or self._get is None:
            return None
        try:
            value = await self._get(keys=self.keys, args=[digest, self._ttl_ms])
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed(exc)
            return None
        return None if value is None else _parse(value)

    async def put(self, digest: str, codes: list[int]) -> None:
        if self._usable() is None or self._put is None:
            return
        args: list[str | int] = [
            digest,
            json.dumps(codes, separators=(",", ":")),
            self._ttl_ms,
            self.capacity,
        ]
        try:
            await self._put(keys=self.keys, args=args)
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed(exc)


class FileSharedCodes:
    """Reference codes as files in ``directory``, at most ``capacity`` of them (file work in threads)."""

    def __init__(self, directory: Path, capacity: int) -> None:
        self.directory = directory
        self.capacity = capacity

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def _path(self, digest: str) -> Path | None:
        return self.directory / f"{digest}.codes" if DIGEST_RE.fullmatch(digest) else None

    async def get(self, digest: str) -> list[int] | None:
        path = self._path(digest)
        if path is None:
            return None
        try:
            return await asyncio.to_thread(self._read, path)
        except OSError as exc:
            log.warning("shared reference codes not read: %r", exc)
            return None

    async def put(self, digest: str, codes: list[int]) -> None:
        path = self._path(digest)
        if path is None:
            return
        try:
            await asyncio.to_thread(self._write, path, json.dumps(codes, separators=(",", ":")))
        except OSError as exc:
            log.warning("shared reference codes not stored: %r", exc)

    @staticmethod
    def _read(path: Path) -> list[int] | None:
        try:
            codes = _parse(path.read_bytes())
        except FileNotFoundError:
            return None
        if codes is not None:
            os.utime(path)  # recently used: evicted last
        return codes

    def _write(self, path: Path, data: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        files = sorted(self.directory.glob("*.codes"), key=_mtime)
        for stale in files[: max(0, len(files) - self.capacity)]:
            stale.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def shared_codes_for(settings: ServerSettings, family: str) -> RedisSharedCodes | FileSharedCodes | None:
    """Encoded references of ``family`` shared with the other processes in the voice store: Redis (every
    replica) or ``VOICES_DIR/.references/<family>`` (one host's workers), at most REFERENCE_CACHE_SIZE of
    them; none when it is 0."""
    if settings.REFERENCE_CACHE_SIZE == 0:
        return None
    if settings.VOICE_STORE == "redis":
        prefix = f"{settings.REDIS_KEY_PREFIX}references:{family}:"
        return RedisSharedCodes(
            settings.REDIS_URL, prefix, settings.SHARED_REFERENCE_TTL_S, settings.REFERENCE_CACHE_SIZE
        )
    return FileSharedCodes(Path(settings.VOICES_DIR) / ".references" / family, settings.REFERENCE_CACHE_SIZE)
