"""Store fixtures: a settable clock, and a unique key prefix on the real Redis at 127.0.0.1:6379."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator

import pytest

REDIS_URL = "redis://127.0.0.1:6379/0"


class Clock:
    """Epoch seconds that only move when told to."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A key prefix of this test's own on the project's Redis; its keys are deleted afterwards.

    Skipped only where redis-server is not installed at all; an installed one that does not answer
    fails the test (CI starts it when none answers).
    """
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed: the redis interleave store cannot be tested here")
    import redis

    prefix = f"tts:test:{uuid.uuid4().hex}:"
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
