"""The turn store shared by hosts: one Redis list per id (``<prefix><sha256(id)>``), one JSON turn per
element, oldest first, with a TTL renewed on every append.

An append is one Lua script, so it is atomic against every other client: push the turn, trim the list
to what ``turns.retain`` keeps (the same rule, walked newest to oldest in Lua), renew the TTL. Timeouts
are short and retries few: a Redis that does not answer must cost a request little before it goes on
cold (the caller turns ``StoreError`` into a cold start).
"""

from __future__ import annotations

import json
import math

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from app.interleave.ids import digest
from app.interleave.stores.base import History, StoreError
from app.interleave.turns import Turn

CONNECT_TIMEOUT_S = 0.5
COMMAND_TIMEOUT_S = 1.0
DEFAULT_PREFIX = "tts:interleave:"

# KEYS[1]: the id's list. ARGV: turn JSON, keep (0 = no limit), max codes, TTL in ms.
# Mirrors turns.retain: keep the newest turns in the new turn's voice, at most `keep`, and none older
# once the newer ones hold `max codes` (a turn weighs its codes x 50 / codes_per_second, Turn.cost).
# An element that does not decode ends the walk (it is dropped).
_APPEND = """
redis.call('RPUSH', KEYS[1], ARGV[1])
local keep, max_codes = tonumber(ARGV[2]), tonumber(ARGV[3])
local items = redis.call('LRANGE', KEYS[1], 0, -1)
local voice = cjson.decode(ARGV[1]).voice
local kept, codes = 0, 0
for i = #items, 1, -1 do
  local ok, turn = pcall(cjson.decode, items[i])
  if not ok or type(turn) ~= 'table' or turn.voice ~= voice or type(turn.codes) ~= 'table' then break end
  if (keep > 0 and kept >= keep) or codes >= max_codes then break end
  kept = kept + 1
  codes = codes + #turn.codes * 50 / (tonumber(turn.codes_per_second) or 50)
end
redis.call('LTRIM', KEYS[1], -kept, -1)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return kept
"""


class RedisStore:
    """Turns per id in Redis at ``url`` (``redis://host:port/db``), under ``prefix``."""

    name = "redis"

    def __init__(self, url: str, ttl_s: float, max_codes: int, prefix: str = DEFAULT_PREFIX) -> None:
        self.url = url
        self.prefix = prefix
        self._ttl_ms = max(1, math.ceil(ttl_s * 1000))
        self._max_codes = max_codes
        self._client: Redis | None = None
        self._append: AsyncScript | None = None

    async def start(self) -> None:
        """Create the client (connections open on first use: a Redis that is down does not stop startup)."""
        if self._client is None:
            self._client = Redis.from_url(
                self.url,
                socket_connect_timeout=CONNECT_TIMEOUT_S,
                socket_timeout=COMMAND_TIMEOUT_S,
                retry=Retry(NoBackoff(), 1),
            )
            self._append = self._client.register_script(_APPEND)  # EVALSHA, loaded on first use

    async def close(self) -> None:
        if self._client is not None:
            client, self._client, self._append = self._client, None, None
            await client.aclose()

    def key(self, interleave_id: str) -> str:
        """The Redis key of an id."""
        return self.prefix + digest(interleave_id)

    def _redis(self) -> Redis:
        if self._client is None:
            raise StoreError("the redis interleave store is not started")
        return self._client

    async def load(self, interleave_id: str) -> History:
        try:
            async with self._redis().pipeline(transaction=True) as pipe:
                pipe.lrange(self.key(interleave_id), 0, -1)
                pipe.pttl(self.key(interleave_id))
                items, ttl_ms = await pipe.execute()
        except (RedisError, OSError, TimeoutError) as exc:
            raise StoreError(f"redis interleave store failed: {exc!r}") from exc
        try:
            turns = [Turn.from_obj(json.loads(item)) for item in items]
        except ValueError:
            return History()  # a corrupt element: the history reads as empty
        return History(turns, ttl_ms / 1000 if ttl_ms > 0 else None) if turns else History()

    async def append(self, interleave_id: str, turn: Turn, keep: int) -> None:
        if self._append is None:
            raise StoreError("the redis interleave store is not started")
        try:
            args: list[str | int] = [turn.to_json(), keep, self._max_codes, self._ttl_ms]
            await self._append(keys=[self.key(interleave_id)], args=args)
        except (RedisError, OSError, TimeoutError) as exc:
            raise StoreError(f"redis interleave store failed: {exc!r}") from exc

    async def delete(self, interleave_id: str) -> bool:
        try:
            return bool(await self._redis().delete(self.key(interleave_id)))
        except (RedisError, OSError, TimeoutError) as exc:
            raise StoreError(f"redis interleave store failed: {exc!r}") from exc
