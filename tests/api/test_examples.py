"""The scripts in examples/ run against the server (fake vLLM, 48 codes a request) as a user runs them."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
from pathlib import Path

import pytest

from tests.fakes.fake_vllm import FakeVLLM

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PCM_BYTES = 48 * 480 * 2  # 48 speech tokens, 480 samples each, 16-bit


async def run(command: list[str], base_url: str, cwd: Path) -> str:
    """Run ``command`` with TTS_API_BASE_URL set (without blocking the server's event loop); its stdout."""
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        env=os.environ | {"TTS_API_BASE_URL": base_url},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def test_openai_sdk_examples(app_url: str, tmp_path: Path) -> None:
    await run([sys.executable, str(EXAMPLES / "openai_buffered.py"), "a.wav"], app_url, tmp_path)
    assert (tmp_path / "a.wav").read_bytes()[:4] == b"RIFF"
    out = await run([sys.executable, str(EXAMPLES / "openai_streaming.py"), "s.pcm"], app_url, tmp_path)
    assert (tmp_path / "s.pcm").stat().st_size == PCM_BYTES
    assert "first audio after" in out
    out = await run([sys.executable, str(EXAMPLES / "openai_sse.py"), "e.pcm"], app_url, tmp_path)
    assert (tmp_path / "e.pcm").stat().st_size == PCM_BYTES
    assert "'output_tokens'" in out


async def test_curl_script(app_url: str, tmp_path: Path) -> None:
    out = await run(["bash", str(EXAMPLES / "curl.sh")], app_url, tmp_path)
    assert (tmp_path / "hello.wav").read_bytes()[:4] == b"RIFF"
    assert (tmp_path / "stream.pcm").stat().st_size == PCM_BYTES
    assert "speech.audio.done" in out
    assert "ringgit" in out
    assert sorted(path.name for path in tmp_path.iterdir()) == ["hello.wav", "stream.pcm"]


async def test_livekit_example_sends_the_interleave_header(app_url: str, fake_vllm: FakeVLLM) -> None:
    spec = importlib.util.spec_from_file_location("livekit_agent_example", EXAMPLES / "livekit_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    client = module.make_client(app_url, "room-42")
    tts = module.make_tts(client)
    try:
        async with tts.synthesize("Hello from the example agent.") as stream:
            frames = [event.frame async for event in stream]
    finally:
        await tts.aclose()
        await client.close()
    assert client.default_headers["X-Interleave-Id"] == "room-42"
    assert sum(f.samples_per_channel for f in frames) >= 48 * 480
    assert fake_vllm.requests, "the request reached the LM"


@pytest.mark.parametrize("name", ["openai_buffered.py", "openai_streaming.py", "openai_sse.py"])
def test_examples_default_to_the_demo_url(name: str) -> None:
    assert 'os.environ.get("TTS_API_BASE_URL", "http://localhost:9091")' in (EXAMPLES / name).read_text()
