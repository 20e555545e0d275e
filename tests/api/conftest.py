"""Integration harness: the real app under uvicorn on a free port, wired to a fake vLLM or the tiny LM."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI

from app.config import Settings
from app.main import create_app
from tests.conftest import make_settings
from tests.fakes.fake_vllm import FakeVLLM, Script
from tests.speech_audio import espeak_wav


def serve(settings: Settings) -> AbstractAsyncContextManager[str]:
    """Run ``create_app(settings)`` under uvicorn in this event loop; yield its base URL."""
    return serve_app(create_app(settings))


@asynccontextmanager
async def serve_app(app: FastAPI, **options: Any) -> AsyncIterator[str]:
    """Run ``app`` under uvicorn in this event loop, with uvicorn ``options`` on top of a free loopback
    port; yield its base URL."""
    config = {"host": "127.0.0.1", "port": 0, "log_level": "warning"} | options
    server = uvicorn.Server(uvicorn.Config(app, **config))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()  # startup failed: raise its error
            raise RuntimeError("server exited during startup")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@pytest.fixture
async def fake_vllm() -> AsyncIterator[FakeVLLM]:
    """A scriptable fake vLLM on a free port (48 codes, 8 per event, no pacing, by default)."""
    fake = FakeVLLM(Script(codes=list(range(1000, 1048)), tokens_per_event=8))
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


def http_settings(codec_dir: Path, lm_url: str, **overrides: Any) -> Any:
    """Settings for the http backend against ``lm_url``, with short timeouts for tests."""
    values: dict[str, object] = {
        "LM_BACKEND": "http",
        "TTS_API": lm_url,
        "CODEC_MODEL": str(codec_dir),
        "DEVICE": "cpu",
        "LM_CONNECT_TIMEOUT_S": 2.0,
        "LM_FIRST_TOKEN_TIMEOUT_S": 2.0,
        "LM_TOKEN_TIMEOUT_S": 2.0,
        "DISCONNECT_POLL_S": 0.05,
        "DEFAULT_PLAYBACK_SPEED": 0.4,  # 20-token first window: several windows per test utterance
        "CODEC_BUCKETS": [16, 24, 32, 48, 64],  # decode lengths scaled to the short test utterances
    }
    return make_settings(**(values | overrides))


@pytest.fixture
async def app_url(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> AsyncIterator[str]:
    """Base URL of the app wired to ``fake_vllm``."""
    async with serve(http_settings(tiny_codec_dir, fake_vllm.url)) as url:
        yield url


REFERENCE_TEXT = "Hello there, this is a reference voice for the test."


@pytest.fixture(scope="session")
def reference_wav(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """About 2.8 s of espeak-ng speech saying REFERENCE_TEXT (22.05 kHz mono wav), made once."""
    return espeak_wav(tmp_path_factory.mktemp("reference") / "ref.wav", REFERENCE_TEXT).read_bytes()
