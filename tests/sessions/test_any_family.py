"""A family with no stream of its own (the tone family, written as a third family would be) served over
the realtime protocol through the shared segmented stream; and a WebSocket under the server's
header-read timeout (``python -m app``'s connection protocol), which stops applying once the connection
upgrades."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import websockets

from app.api.connection import ConnectionLimits, connection_protocol
from app.main import create_app
from tests.api.conftest import serve_app
from tests.fakes.fake_vllm import FakeVLLM
from tests.fakes.tone.family import MODEL
from tests.fakes.tone.serving import tone_engine, tone_settings
from tests.sessions.test_protocol import PATH, Client


async def test_the_tone_family_speaks_a_realtime_turn_under_the_header_timeout(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM
) -> None:
    settings = tone_settings(tiny_codec_dir, fake_vllm.url, HEADER_READ_TIMEOUT_S=0.3)
    engine, _ = tone_engine(settings)
    app = create_app(settings, engine=engine)
    limits = ConnectionLimits(header_timeout_s=0.3, max_header_bytes=65536, write_stall_s=30)
    async with serve_app(app, http=connection_protocol(limits)) as url:
        ws = await websockets.connect(url.replace("http", "ws", 1) + PATH)
        try:
            client = Client(ws)
            options = {"model": MODEL, "response_format": "pcm", "timestamps": True}
            await client.send(type="context.create", context_id="t", options=options)
            await client.send(type="input.text", context_id="t", seq=0, text="One sentence first. ")
            await asyncio.sleep(0.8)  # past the header timeout: the socket stays open
            await client.send(type="input.text", context_id="t", seq=1, text="And a second one.")
            await client.send(type="input.done", context_id="t")
            turn = await client.until("t", "context.done", "error")
        finally:
            await ws.close()
    assert turn.of("context.done") and turn.audio
    words = [w["word"] for event in turn.of("word.timestamps") for w in event["words"]]
    assert words == ["One", "sentence", "first.", "And", "a", "second", "one."]


async def test_a_turn_waiting_for_its_text_is_not_counted_as_a_slow_lm(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM
) -> None:
    """The admission reads the LM's pace from the generations it measured; a realtime turn's generation
    also waits for text the client has not sent yet, which is parked time, not LM time."""
    settings = tone_settings(tiny_codec_dir, fake_vllm.url)
    engine, _ = tone_engine(settings)
    app = create_app(settings, engine=engine)
    async with serve_app(app) as url:
        ws = await websockets.connect(url.replace("http", "ws", 1) + PATH)
        try:
            client = Client(ws)
            started = time.perf_counter()
            await client.send(type="context.create", context_id="t", options={"model": MODEL})
            await client.send(type="input.text", context_id="t", seq=0, text="One sentence first. ")
            await asyncio.sleep(0.8)  # the agent's LLM is still writing
            await client.send(type="input.text", context_id="t", seq=1, text="And a second one.")
            await client.send(type="input.done", context_id="t")
            turn = await client.until("t", "context.done", "error")
            elapsed = time.perf_counter() - started
        finally:
            await ws.close()
    usage = turn.of("context.done")[0]["usage"]
    assert usage["parked_seconds"] >= 0.7
    pace = engine.metrics.capacity.lm.rate  # this turn's audio seconds per second of its LM's time
    assert pace is not None and pace > usage["audio_seconds"] / (elapsed - 0.7)
