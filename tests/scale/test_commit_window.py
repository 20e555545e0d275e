"""The interleave commit window: a turn is in the store before its response's last byte (docs/interleave.md).

The store here takes ``DELAY_S`` to append, far longer than a client needs to send its next request
to another worker; a second store on the same directory stands for that other worker. Every transport
(streamed, buffered, SSE) must end only after the turn is readable there. A store slower than
``COMMIT_WAIT_S`` ends the response after that bound and lands the turn in the background.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from app.interleave import service
from app.interleave.stores.base import TurnStore
from app.interleave.stores.shm import ShmStore
from app.interleave.turns import Turn
from app.main import create_app
from app.synthesis.engine import Engine
from tests.api.conftest import http_settings, serve_app
from tests.fakes.fake_vllm import FakeVLLM

SPEECH = "/v1/audio/speech"
DELAY_S = 0.4


class SlowAppends:
    """A turn store whose appends take ``delay_s`` longer."""

    def __init__(self, inner: TurnStore, delay_s: float) -> None:
        self.inner, self.delay_s, self.name = inner, delay_s, inner.name

    async def start(self) -> None:
        await self.inner.start()

    async def close(self) -> None:
        await self.inner.close()

    async def load(self, interleave_id: str) -> object:
        return await self.inner.load(interleave_id)

    async def append(self, interleave_id: str, turn: Turn, keep: int) -> None:
        await asyncio.sleep(self.delay_s)
        await self.inner.append(interleave_id, turn, keep)

    async def delete(self, interleave_id: str) -> bool:
        return await self.inner.delete(interleave_id)


def slow_engine(codec_dir: Path, fake: FakeVLLM, turns: Path) -> Engine:
    settings = http_settings(codec_dir, fake.url, INTERLEAVE_STORE="shm", INTERLEAVE_STORE_DIR=str(turns))
    engine = Engine.from_settings(settings)
    assert engine.interleave.store is not None
    engine.interleave.store = SlowAppends(engine.interleave.store, DELAY_S)
    return engine


@pytest.mark.parametrize(
    "fields",
    [{"stream": True}, {"stream": False}, {"stream_format": "sse"}],
    ids=["streamed", "buffered", "sse"],
)
async def test_the_turn_is_stored_before_the_response_ends(
    fields: dict[str, object], tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path
) -> None:
    other_worker = ShmStore(tmp_path / "turns", 600, 1000)
    app = create_app(engine=slow_engine(tiny_codec_dir, fake_vllm, tmp_path / "turns"))
    async with serve_app(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        body = {"input": "Hello there.", "voice": "husein", "interleave_id": "room", **fields}
        response = await client.post(SPEECH, json=body)
        assert response.status_code == 200, response.text
        history = await other_worker.load("room")
    assert [turn.text for turn in history.turns] == ["Hello there."]


async def test_a_store_slower_than_the_bound_ends_the_response_at_the_bound(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "COMMIT_WAIT_S", 0.1)
    other_worker = ShmStore(tmp_path / "turns", 600, 1000)
    app = create_app(engine=slow_engine(tiny_codec_dir, fake_vllm, tmp_path / "turns"))
    async with serve_app(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        body = {"input": "Hello there.", "voice": "husein", "interleave_id": "room"}
        started = time.monotonic()
        response = await client.post(SPEECH, json=body)
        elapsed = time.monotonic() - started
        assert response.status_code == 200, response.text
        assert (await other_worker.load("room")).turns == []  # not yet: the store is slower than the bound
        assert elapsed < DELAY_S + 0.5
        await asyncio.sleep(DELAY_S)
        assert len((await other_worker.load("room")).turns) == 1  # landed in the background
