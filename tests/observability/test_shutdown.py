"""SIGTERM on ``python -m app`` with streams in flight: they finish within the grace, then the rest is
cut, the engine closes and the process exits."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.fakes.fake_vllm import FakeVLLM, Script

pytestmark = pytest.mark.slow  # a server subprocess: torch import and codec load take seconds

SPEECH = "/v1/audio/speech"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_ready(url: str, process: asyncio.subprocess.Process) -> None:
    async with httpx.AsyncClient(timeout=1) as client:
        for _ in range(600):
            if process.returncode is not None:
                raise AssertionError("the server exited during startup")
            try:
                if (await client.get(url + "/health")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("the server did not start")


async def test_sigterm_drains_in_flight_streams(tiny_codec_dir: Path, tmp_path: Path) -> None:
    fake = FakeVLLM(Script(tokens_per_event=4, tokens_per_s=100))  # 12 codes a word, 100 codes a second
    await fake.start()
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PROMETHEUS_MULTIPROC_DIR",)},
        "LM_BACKEND": "http",
        "TTS_API": fake.url,
        "CODEC_MODEL": str(tiny_codec_dir),
        "DEVICE": "cpu",
        "REFERENCE_VOICES": "false",
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "SHUTDOWN_GRACE_S": "2",
        "DEFAULT_PLAYBACK_SPEED": "0.2",
        "LOG_LEVEL": "info",
    }
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log_file:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app", env=env, stderr=log_file, stdout=asyncio.subprocess.DEVNULL
        )
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_ready(url, process)
        async with httpx.AsyncClient(timeout=30) as client:

            async def speak(text: str, started: asyncio.Event) -> tuple[int, bool]:
                received = 0
                try:
                    async with client.stream("POST", url + SPEECH, json={"input": text}) as response:
                        async for chunk in response.aiter_raw():
                            received += len(chunk)
                            started.set()
                    return received, True
                except httpx.HTTPError:
                    return received, False

            short_started, long_started = asyncio.Event(), asyncio.Event()
            short = asyncio.create_task(speak("one two three four five six", short_started))  # 72 codes
            long = asyncio.create_task(speak(" ".join(["word"] * 100), long_started))  # 1200 codes, 12 s
            await asyncio.wait_for(asyncio.gather(short_started.wait(), long_started.wait()), 10)
            signal_at = time.monotonic()
            process.send_signal(signal.SIGTERM)
            (short_bytes, short_ok), (long_bytes, long_ok) = await asyncio.gather(short, long)
            # uvicorn re-raises the captured SIGTERM once shut down, so the exit status reports it
            assert await asyncio.wait_for(process.wait(), 10) in (0, -signal.SIGTERM)
            exited_after = time.monotonic() - signal_at
        long_request = next(r for r in fake.requests if "word word" in r.body["prompt"])
        assert not long_request.completed, "the cut stream's LM generation was closed upstream"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await fake.stop()
    assert short_ok and short_bytes == 72 * 480 * 2, "a stream that fits in the grace completes"
    assert long_bytes < 1200 * 480 * 2, "a stream past the grace is cut"
    assert not long_ok or long_bytes < 1200 * 480 * 2
    assert 1.5 < exited_after < 8
    logged = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    messages = [entry["message"] for entry in logged]
    assert "engine closed" in messages
    assert any(entry.get("logger") == "app.access" and entry.get("status") == 200 for entry in logged)
