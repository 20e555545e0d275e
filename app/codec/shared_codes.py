"""Encoded references shared by every replica: ``<prefix><digest>`` -> the codes as JSON, with a TTL.

Best effort, as a cache should be: a Redis that fails makes a lookup a miss and a put a no-op (logged),
and after a failure the store is skipped for ``BACKOFF_S`` so voice conversion does not pay Redis'
timeouts on every request while it is down. A hit renews the key's TTL (``GETEX``).
"""

from __future__ import annotations

import json
import logging
import math
import time

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 0.5
COMMAND_TIMEOUT_S = 1.0
BACKOFF_S = 5.0


class RedisSharedCodes:
    """Reference codes in Redis at ``url`` under ``prefix`` (one family's), kept ``ttl_s`` after last use."""

    def __init__(self, url: str, prefix: str, ttl_s: float) -> None:
        self.url = url
        self.prefix = prefix
        self._ttl_ms = max(1, math.ceil(ttl_s * 1000))
        self._client: Redis | None = None
        self._skip_until = 0.0

    async def start(self) -> None:
        if self._client is None:
            self._client = Redis.from_url(
                self.url,
                socket_connect_timeout=CONNECT_TIMEOUT_S,
                socket_timeout=COMMAND_TIMEOUT_S,
                retry=Retry(NoBackoff(), 1),
            )

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
        client = self._usable()
        if client is None:
            return None
        try:
            value = await client.getex(self.prefix + digest, px=self._ttl_ms)
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed(exc)
            return None
        if value is None:
            return None
        try:
            codes = json.loads(value)
        except ValueError:
            return None
        if not isinstance(codes, list) or not codes or not all(isinstance(c, int) for c in codes):
            return None
        return codes

    async def put(self, digest: str, codes: list[int]) -> None:
        client = self._usable()
        if client is None:
            return
        try:
            await client.set(self.prefix + digest, json.dumps(codes, separators=(",", ":")), px=self._ttl_ms)
        except (RedisError, OSError, TimeoutError) as exc:
            self._failed(exc)
