"""A WebSocket as a first-class client: API keys (the headers and query parameter Cartesia's clients
use), the session, context, text and input-time limits with their errors, and ``/tts/bytes``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets

from tests.sessions.conftest import Served, serve_both
from tests.sessions.test_protocol import PATH, Client, speak

KEY = "sekret"


@pytest.fixture
async def limited(
    tiny_codec_dir: Path,
    tiny_moss_codec_dir: Path,
    moss_tts_dir: Path,
    tmp_path: Path,
    one_torch_thread: None,
) -> AsyncIterator[Served]:
    overrides: dict[str, Any] = {
        "API_KEYS": KEY,
        "REALTIME_MAX_SESSIONS_PER_KEY": 1,
        "REALTIME_MAX_CONTEXTS": 1,
        "REALTIME_MAX_CONTEXT_CHARS": 60,
        "REALTIME_INPUT_TIMEOUT_S": 0.5,
    }
    async for served in serve_both(tiny_codec_dir, tiny_moss_codec_dir, moss_tts_dir, tmp_path, **overrides):
        yield served


async def test_keys_are_needed_and_taken_as_cartesia_clients_send_them(limited: Served) -> None:
    url = limited.ws + PATH
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(url):
            pass
    assert refused.value.response.status_code == 403
    refusals = 'tts_http_requests_total{method="WS",route="/v1/audio/speech/realtime",status="403"}'
    assert await limited.metric(refusals) == 1  # a WebSocket is counted as HTTP requests are
    for headers, query in (
        ({"X-API-Key": KEY}, ""),
        ({"Authorization": f"Bearer {KEY}"}, ""),
        ({}, f"?api_key={KEY}"),
    ):
        async with websockets.connect(url + query, additional_headers=headers) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"
    async with httpx.AsyncClient(base_url=limited.url) as http:
        body = {"transcript": "Hi there.", "voice": {"mode": "id", "id": "husein"}, "model_id": "sonic-3"}
        assert (await http.post("/tts/bytes", json=body)).status_code == 401
        answer = await http.post("/tts/bytes", json=body, headers={"X-API-Key": KEY})
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("audio/pcm")
        assert len(answer.content) > 0 and len(answer.content) % 2 == 0
        bad = await http.post(
            "/tts/bytes", json=body | {"voice": {"id": "nobody"}}, headers={"X-API-Key": KEY}
        )
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "voice"


async def test_limits_fail_the_context_or_refuse_the_connection(limited: Served) -> None:
    headers = {"X-API-Key": KEY}
    async with websockets.connect(limited.ws + PATH, additional_headers=headers) as ws:
        client = Client(ws)
        async with websockets.connect(limited.ws + PATH, additional_headers=headers) as second:
            refusal = json.loads(await second.recv())
            assert refusal["type"] == "error" and refusal["error"]["type"] == "rate_limit_error"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await second.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
        await client.send(type="context.create", context_id="a", options={"voice": "husein"})
        await client.send(type="context.create", context_id="b", options={"voice": "husein"})
        assert (await client.until("b", "error")).of("error")[-1]["error"]["code"] == "too_many_contexts"
        await client.send(type="input.text", context_id="a", text="x" * 61)
        assert (await client.until("a", "error")).of("error")[-1]["error"]["code"] == "context_too_long"
        await client.send(type="context.create", context_id="c", options={"voice": "husein"})
        await client.send(type="input.text", context_id="c", text="Waiting for the rest")
        assert (await client.until("c", "error")).of("error")[-1]["error"]["code"] == "input_timeout"
        done = await speak(client, "d", "Short and whole.", 3, {"voice": "husein"})
        assert done.of("context.done")
    assert await limited.metric('tts_realtime_contexts_total{outcome="error"}') >= 2
