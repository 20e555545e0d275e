"""A served app with both families on the tiny fixtures (the real MOSS LM stage and codec, NeuCodec on
a fake vLLM whose codes depend on the prompt and seed), for the realtime tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.families.moss.family import MossFamily
from app.main import create_app
from tests.api.conftest import http_settings, serve_app
from tests.fakes.fake_vllm import FakeVLLM, Script

MOSS = "moss-tts-realtime"


@dataclass
class Served:
    """The app under test: its base URL, the app and its fake LM."""

    url: str
    app: FastAPI
    vllm: FakeVLLM

    @property
    def ws(self) -> str:
        return self.url.replace("http", "ws", 1)

    @property
    def moss(self) -> MossFamily:
        (family,) = [f for f in self.app.state.engine.families if isinstance(f, MossFamily)]
        return family

    async def metric(self, name: str) -> float:
        """The value of one sample line of /metrics (0 when absent)."""
        async with httpx.AsyncClient(base_url=self.url) as client:
            text = (await client.get("/metrics")).text
        for line in text.splitlines():
            if line.startswith(name + " ") or (line.startswith(name + "{") and line.split(" ")[0] == name):
                return float(line.rsplit(" ", 1)[1])
        return 0.0


async def serve_both(
    tiny_codec_dir: Path, tiny_moss_codec_dir: Path, moss_tts_dir: Path, tmp_path: Path, **overrides: Any
) -> AsyncIterator[Served]:
    vllm = FakeVLLM(Script(codes=None, tokens_per_event=8))
    await vllm.start()
    values: dict[str, Any] = {
        "MODEL_FAMILIES": ["neucodec", "moss"],
        "MOSS_TTS_MODEL": str(moss_tts_dir),
        "MOSS_CODEC_MODEL": str(tiny_moss_codec_dir),
        "INTERLEAVE_STORE": "memory",
        "VOICES_DIR": str(tmp_path / "voices"),
        "MOSS_CACHE_POSITIONS": 2000,
        "MOSS_DEFAULT_MAX_TOKENS": 40,
        "DEFAULT_MAX_TOKENS": 200,
    }
    settings = http_settings(tiny_codec_dir, vllm.url, **(values | overrides))
    app = create_app(settings)
    try:
        async with serve_app(app) as url:
            yield Served(url, app, vllm)
    finally:
        await vllm.stop()


@pytest.fixture
async def served(
    tiny_codec_dir: Path,
    tiny_moss_codec_dir: Path,
    moss_tts_dir: Path,
    tmp_path: Path,
    one_torch_thread: None,
) -> AsyncIterator[Served]:
    async for app in serve_both(tiny_codec_dir, tiny_moss_codec_dir, moss_tts_dir, tmp_path):
        yield app


@pytest.fixture
async def fake_vllm() -> AsyncIterator[FakeVLLM]:
    """A fake vLLM (random codes per prompt and seed) on a free port."""
    vllm = FakeVLLM(Script(codes=None, tokens_per_event=8))
    await vllm.start()
    try:
        yield vllm
    finally:
        await vllm.stop()
