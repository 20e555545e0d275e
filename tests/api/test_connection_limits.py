"""The limits of one connection, end to end against the app served with ``python -m app``'s options:
a client that stops reading a response (write stall), and request heads past MAX_HEADER_BYTES."""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.api.test_hostile_http import HTTP_IMPLEMENTATIONS, exchange, serve_as_main, settings_for
from tests.api.test_moss_http import serve_moss
from tests.api.test_moss_http import settings_for as moss_settings
from tests.api.test_speech_http import body
from tests.fakes.fake_vllm import FakeVLLM, Script
from tests.scale.test_two_servers import metric

SPEECH = "/v1/audio/speech"


# --- a client that never reads --------------------------------------------------------------------


def never_reading_client(base: str, payload: dict[str, object]) -> socket.socket:
    """A connection that sends a streamed speech request and then reads nothing (a small receive
    buffer, so the server's side fills up soon)."""
    parts = urlsplit(base)
    assert parts.hostname is not None and parts.port is not None
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((parts.hostname, parts.port))
    data = json.dumps(payload).encode()
    head = f"POST {SPEECH} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
    sock.sendall(head.encode() + f"content-length: {len(data)}\r\n\r\n".encode() + data)
    return sock


async def active_streams(client: httpx.AsyncClient) -> float:
    return metric((await client.get("/metrics")).text, "tts_active_streams")


async def until(condition: object, timeout_s: float) -> bool:
    """Poll the async ``condition`` every 50 ms until it holds (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await condition():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.05)
    return False


def connection_was_closed(sock: socket.socket) -> bool:
    """True when the server has closed (reset) the connection: reading what is left ends in EOF or RST."""
    sock.settimeout(5)
    try:
        while sock.recv(1 << 20):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    finally:
        sock.close()
    return True


async def test_a_client_that_never_reads_is_cut_off_and_frees_its_slot_and_lm_stream(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path
) -> None:
    # 6400 codes at once (about 6 MB of pcm, more than the socket buffers hold), then the LM pauses
    fake_vllm.script = Script(
        codes=[1000 + i % 40 for i in range(8000)], tokens_per_event=8, stall_after_events=800, stall_s=30
    )
    settings = settings_for(
        tiny_codec_dir,
        fake_vllm,
        tmp_path,
        MAX_CONCURRENT_STREAMS=1,
        MAX_QUEUED_STREAMS=0,
        WRITE_STALL_TIMEOUT_S=0.5,
        LM_MAX_MODEL_LEN=9000,
        LM_TOKEN_TIMEOUT_S=60,
    )
    async with serve_as_main(settings) as base, httpx.AsyncClient(base_url=base, timeout=30) as client:
        sock = await asyncio.to_thread(
            never_reading_client, base, body(max_tokens=8000, stream_normalize=False)
        )
        try:
            assert await until(lambda: _at_least_one(client), 10), "the stream never started"
            released = await until(lambda: _none_active(client), 20)
            assert released, "the stalled stream still holds its admission slot"
            await asyncio.wait_for(fake_vllm.requests[0].disconnected.wait(), 5)  # its LM stream closed
            assert not fake_vllm.requests[0].completed
            fake_vllm.script = Script(codes=list(range(1000, 1048)), tokens_per_event=8)
            assert (await client.post(SPEECH, json=body(stream=False))).status_code == 200
            errors = metric((await client.get("/metrics")).text, "tts_errors_total", kind="client_disconnect")
            assert errors == 1
        finally:
            assert await asyncio.to_thread(connection_was_closed, sock)


async def _at_least_one(client: httpx.AsyncClient) -> bool:
    return await active_streams(client) >= 1


async def _none_active(client: httpx.AsyncClient) -> bool:
    return await active_streams(client) == 0


async def test_a_moss_client_that_never_reads_frees_its_engine_row_and_codec_stream(
    monkeypatch: pytest.MonkeyPatch,
    tiny_codec_dir: Path,
    tiny_moss_codec_dir: Path,
    fake_vllm: FakeVLLM,
    tmp_path: Path,
) -> None:
    settings = moss_settings(
        tiny_codec_dir,
        tiny_moss_codec_dir,
        fake_vllm.url,
        tmp_path,
        MAX_CONCURRENT_STREAMS=1,
        MAX_QUEUED_STREAMS=0,
        WRITE_STALL_TIMEOUT_S=0.5,
    )
    async with asynccontextmanager(serve_moss)(monkeypatch, settings, serve=serve_as_main) as served:
        served.engine.frames = 4000  # 15 MB of pcm: far more than the socket buffers hold
        served.engine.delay_s = 0.0005
        codec = served.family.codec
        assert codec is not None
        payload = {
            "model": "moss-tts-realtime",
            "input": "one two",
            "max_tokens": 4000,
            "stream_normalize": False,
        }
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
            sock = await asyncio.to_thread(never_reading_client, served.url, payload)
            try:

                async def row_open() -> bool:
                    return served.engine.open_rows == 1

                async def all_freed() -> bool:
                    return (
                        served.engine.open_rows == 0
                        and codec.live_streams == 0
                        and not await active_streams(client)
                    )

                assert await until(row_open, 10), "the stream never started"
                assert await until(all_freed, 20), (served.engine.open_rows, codec.live_streams)
                assert served.engine.finished_rows == 1 and len(served.engine.jobs) == 1
                served.engine.frames = None
                speech = await client.post(SPEECH, json={"model": "moss-tts-realtime", "input": "one two"})
                assert speech.status_code == 200
            finally:
                assert await asyncio.to_thread(connection_was_closed, sock)


# --- request heads past MAX_HEADER_BYTES -----------------------------------------------------------


@pytest.mark.parametrize("http", HTTP_IMPLEMENTATIONS)
@pytest.mark.parametrize(
    "head",
    [
        b"GET /health HTTP/1.1\r\nhost: x\r\nx-padding: " + b"a" * 70_000,
        b"GET /health HTTP/1.1\r\nhost: x\r\n" + b"x-many: 1\r\n" * 7_000,
        b"GET /" + b"a" * 70_000,
    ],
    ids=["one_huge_header", "many_headers", "huge_url"],
)
async def test_a_request_head_past_the_cap_is_431_at_once(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path, http: str, head: bytes
) -> None:
    settings = settings_for(tiny_codec_dir, fake_vllm, tmp_path, MAX_HEADER_BYTES=65536)
    async with serve_as_main(settings, http) as base:
        started = time.perf_counter()
        reply = await exchange(base, head, wait_s=5.0)
        elapsed = time.perf_counter() - started
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            near_cap = await client.get("/health", headers={"x-padding": "a" * 60_000})
    assert reply.startswith(b"HTTP/1.1 431 "), reply[:200]
    error = json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]
    assert error["code"] == "request_header_fields_too_large" and "65536" in error["message"]
    assert elapsed < 2.5, "answered when the cap passed, not at the header deadline"
    assert near_cap.status_code == 200, "a head within the cap is served"


@pytest.mark.parametrize("http", HTTP_IMPLEMENTATIONS)
@pytest.mark.parametrize(
    "start", [b"GET /health HTTP/1.1\r\nhost: x\r\nx-flood: ", b"GET /"], ids=["header", "url"]
)
async def test_health_stays_fast_while_a_client_sends_an_80_mb_head(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path, http: str, start: bytes
) -> None:
    """Without the cap, httptools parses an 80 MB head for seconds on the event loop (every other
    client's median /health about 170 ms here); with it the head is refused at 64 KiB and not read."""
    async with serve_as_main(settings_for(tiny_codec_dir, fake_vllm, tmp_path), http) as base:
        parts = urlsplit(base)
        done = threading.Event()
        sent = 0

        def flood() -> None:
            nonlocal sent
            assert parts.hostname is not None and parts.port is not None
            try:
                with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
                    sock.sendall(start)
                    block = b"a" * (1 << 20)
                    while sent < 80 << 20:
                        sock.sendall(block)
                        sent += len(block)
            except OSError:  # reset once the server stopped reading and closed
                pass
            finally:
                done.set()

        flooding = asyncio.create_task(asyncio.to_thread(flood))
        latencies: list[float] = []
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            while not done.is_set() or len(latencies) < 10:
                started = time.perf_counter()
                assert (await client.get("/health")).status_code == 200
                latencies.append(time.perf_counter() - started)
                await asyncio.sleep(0.05)
        await flooding
    median = statistics.median(latencies)
    print(
        f"/health during the flood: median {median * 1e3:.1f} ms, max {max(latencies) * 1e3:.0f} ms; "
        f"the flood sent {sent >> 20} MB"
    )
    assert sent < 16 << 20, "the server went on reading the head past the cap"
    assert median < 0.08, latencies
