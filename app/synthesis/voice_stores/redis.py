"""The voice store every replica shares: one Redis hash of voices and a version key.

``<prefix>voices`` maps each lowercased name to the voice's JSON (its codes per model family, its
consent record, the fingerprint of the key that registered it); ``<prefix>voices:version`` holds a
random token that every change replaces. Adds and deletes are Lua scripts, so "is the name free, is
there room, store it, new version" (and "is it this owner's, delete it") is one atomic step against
every replica: two replicas registering one name at once get one 201 and one 409, and the
limit holds across replicas. A reader checks the version (one GET) on every use and reloads the hash
(``GET`` + ``HGETALL`` in one transaction) when it moved. Timeouts are short and retries few, as in the
interleave store: a Redis that is down costs a request about a second, then a 503.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable
from typing import Generic

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from app.synthesis.registry import AddResult, R, RegisteredVoice, RemoveResult, VoiceStoreError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 0.5
COMMAND_TIMEOUT_S = 1.0

# KEYS: the hash, the version key. ARGV: lowercased name, voice JSON, max voices, new version token.
_ADD = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 'exists' end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 'full' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[4])
return 'added'
"""

# KEYS: the hash, the version key. ARGV: lowercased name, exact name, new version token, the owner
# the voice must record ("" for any; a JSON null owner is cjson.null, never equal to a string).
_REMOVE = """
local stored = redis.call('HGET', KEYS[1], ARGV[1])
if not stored then return 'absent' end
local ok, voice = pcall(cjson.decode, stored)
local record = ok and type(voice) == 'table'
if record and voice.name ~= ARGV[2] then return 'absent' end
if ARGV[4] ~= '' and not (record and voice.owner == ARGV[4]) then return 'not_owner' end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[3])
return 'removed'
"""
_OUTCOMES: dict[str, AddResult] = {"added": "added", "exists": "exists", "full": "full"}
_REMOVALS: dict[str, RemoveResult] = {"removed": "removed", "absent": "absent", "not_owner": "not_owner"}


def connect(url: str) -> Redis:
    """A client with the short timeouts and the single retry every shared-store client here uses."""
    return Redis.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=COMMAND_TIMEOUT_S,
        retry=Retry(NoBackoff(), 1),
    )


class RedisRecordStore(Generic[R]):
    """Records in Redis at ``url`` under ``prefix`` (``<prefix><kind>``, ``<prefix><kind>:version``), read
    back with ``parse``."""

    name = "redis"

    def __init__(self, url: str, prefix: str, kind: str, parse: Callable[[dict[str, object]], R]) -> None:
        self.url = url
        self.key = prefix + kind
        self.version_key = prefix + kind + ":version"
        self.parse = parse
        self._client: Redis | None = None
        self._add: AsyncScript | None = None
        self._remove: AsyncScript | None = None

    async def start(self) -> None:
        """Create the client (connections open on first use: a Redis that is down does not stop startup)."""
        if self._client is None:
            self._client = connect(self.url)
            self._add = self._client.register_script(_ADD)
            self._remove = self._client.register_script(_REMOVE)

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    def _redis(self) -> Redis:
        if self._client is None:
            raise VoiceStoreError("the redis voice store is not started")
        return self._client

    async def version(self) -> str:
        try:
            value = await self._redis().get(self.version_key)
        except (RedisError, OSError, TimeoutError) as exc:
            raise VoiceStoreError(f"redis voice store failed: {exc!r}") from exc
        return _text(value)

    async def load(self) -> tuple[str, list[R]]:
        try:
            async with self._redis().pipeline(transaction=True) as pipe:
                pipe.get(self.version_key)
                pipe.hgetall(self.key)
                version, items = await pipe.execute()
        except (RedisError, OSError, TimeoutError) as exc:
            raise VoiceStoreError(f"redis voice store failed: {exc!r}") from exc
        voices = []
        for field, value in sorted(items.items()):
            try:
                voices.append(self.parse(json.loads(value)))
            except ValueError as exc:
                log.warning("skipping record %r of %s in redis: %s", field, self.key, exc)
        return _text(version), voices

    async def add(self, voice: R, max_voices: int) -> AddResult:
        assert self._add is not None, "start() first"
        data = json.dumps(voice.to_json(), separators=(",", ":"))
        args: list[str | int] = [voice.name.lower(), data, max_voices, secrets.token_hex(8)]
        try:
            result = await self._add(keys=[self.key, self.version_key], args=args)
        except (RedisError, OSError, TimeoutError) as exc:
            raise VoiceStoreError(f"redis voice store failed: {exc!r}") from exc
        outcome = _OUTCOMES.get(_text(result))
        if outcome is None:
            raise VoiceStoreError(f"unexpected answer from the add script: {result!r}")
        return outcome

    async def remove(self, name: str, owner: str | None) -> RemoveResult:
        assert self._remove is not None, "start() first"
        args = [name.lower(), name, secrets.token_hex(8), owner or ""]
        try:
            result = await self._remove(keys=[self.key, self.version_key], args=args)
        except (RedisError, OSError, TimeoutError) as exc:
            raise VoiceStoreError(f"redis voice store failed: {exc!r}") from exc
        outcome = _REMOVALS.get(_text(result))
        if outcome is None:
            raise VoiceStoreError(f"unexpected answer from the remove script: {result!r}")
        return outcome


class RedisVoiceStore(RedisRecordStore[RegisteredVoice]):
    """Registered voices in Redis (``<prefix>voices``)."""

    def __init__(self, url: str, prefix: str) -> None:
        super().__init__(url, prefix, "voices", RegisteredVoice.from_json)


def _text(value: object) -> str:
    """A Redis reply as text ("" for none)."""
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)
