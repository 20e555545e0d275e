"""A successful ``python -m app`` as a newcomer sees it: LOG_FORMAT=auto is readable text on a terminal
(a pseudo-terminal here) and JSON on a pipe, uvicorn's lines included and without colour codes, and
one "ready" line names the URL, the models, the voices and a curl example."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import torch

from tests.fakes.fake_hub import FakeHub
from tests.observability.test_first_run import server_env

pytestmark = pytest.mark.slow  # a server subprocess: torch import and codec load take seconds

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
READY = "ready on http://127.0.0.1:"
STARTUP_DEADLINE_S = 120


def ready_line_read(seen: bytes) -> bool:
    """The ready line, whole, is in ``seen``."""
    _, found, after = seen.partition(READY.encode())
    return bool(found) and b"\n" in after


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def test_terminal_gets_text_lines(tiny_codec_dir: Path, tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    env = server_env(tmp_path, CODEC_MODEL=str(tiny_codec_dir))
    process = subprocess.Popen(
        [sys.executable, "-m", "app"], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=follower
    )
    os.close(follower)
    seen = b""
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while not ready_line_read(seen) and time.monotonic() < deadline:
            if process.poll() is not None and not select.select([leader], [], [], 0)[0]:
                break
            if select.select([leader], [], [], 0.5)[0]:
                try:
                    seen += os.read(leader, 65536)
                except OSError:  # the follower side closed: the process exited
                    break
    finally:
        stop(process)
        os.close(leader)
    text = seen.decode()
    assert READY in text, text[-3000:]
    lines = [line for line in text.replace("\r\n", "\n").split("\n") if line.strip()]
    assert not any(line.lstrip().startswith("{") for line in lines), "no JSON on a terminal"
    running = next(line for line in lines if "Uvicorn running on" in line)
    assert " INFO uvicorn.error Uvicorn running on http://127.0.0.1:" in running
    assert not ANSI.search(running), "uvicorn's line carries no colour codes"
    ready = next(line for line in lines if READY in line)
    assert " INFO app.startup ready on " in ready
    assert "models TTS-model, tts-1, tts-1-hd, gpt-4o-mini-tts; voices husein, idayu (+13 aliases)" in ready
    assert "Try: curl -s http://127.0.0.1:" in ready and "-o hello.wav" in ready
    assert text.count(READY) == 1


def test_pipe_gets_json_lines(tiny_codec_dir: Path, tmp_path: Path) -> None:
    env = server_env(tmp_path, CODEC_MODEL=str(tiny_codec_dir))
    log_path = tmp_path / "stderr.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "app"], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log_file
        )
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while not ready_line_read(log_path.read_bytes()) and time.monotonic() < deadline:
            assert process.poll() is None, log_path.read_text()[-3000:]
            time.sleep(0.2)
        url = f"http://127.0.0.1:{env['PORT']}"
        speech = httpx.post(f"{url}/v1/audio/speech", json={"input": "Hello!", "voice": "husein"}, timeout=30)
        ready_status = httpx.get(f"{url}/ready", timeout=30).status_code
    finally:
        stop(process)
    assert (speech.status_code, ready_status) == (502, 503)  # what the warning below says
    lines = log_path.read_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert "\x1b" not in log_path.read_text() and "\\u001b" not in log_path.read_text()
    assert not any("color_message" in r for r in records)
    assert any(r["logger"] == "uvicorn.error" and "Uvicorn running on" in r["message"] for r in records)
    ready = [r for r in records if r["message"].startswith(READY)]
    assert len(ready) == 1
    port = env["PORT"]
    assert ready[0]["url"] == f"http://127.0.0.1:{port}"
    assert ready[0]["models"] == ["TTS-model", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"]
    assert ready[0]["voices"] == ["husein", "idayu"]
    example = ready[0]["example"]
    assert example.startswith(f"curl -s http://127.0.0.1:{port}/v1/audio/speech ")
    body = json.loads(example.split(" -d '")[1].split("'")[0])
    assert body == {"input": "Hello!", "voice": "husein", "response_format": "wav", "stream": False}
    warning = next(r for r in records if "does not answer yet" in r["message"])
    assert warning["level"] == "warning" and env["TTS_API"] in warning["message"]
    assert "requests fail with 502" in warning["message"] and "/ready answers 503" in warning["message"]


def padded_codec(tiny_codec_dir: Path, directory: Path, padding_bytes: int) -> Path:
    """The tiny checkpoint plus one tensor the decoder never reads, so the download is large enough for
    several progress updates (the Hub client reads 10 MB at a time)."""
    directory.mkdir()
    shutil.copy(tiny_codec_dir / "neucodec_config.json", directory)
    state = torch.load(tiny_codec_dir / "pytorch_model.bin", weights_only=True)
    state["padding.unused"] = torch.zeros(padding_bytes, dtype=torch.uint8)
    torch.save(state, directory / "pytorch_model.bin")
    return directory


async def start_logging_to(log_path: Path, env: dict[str, str], cwd: Path) -> asyncio.subprocess.Process:
    """``python -m app`` with stderr into ``log_path`` (a file: LOG_FORMAT=auto is JSON)."""
    with log_path.open("wb") as log_file:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app", env=env, cwd=cwd, stdout=asyncio.subprocess.DEVNULL, stderr=log_file
        )


async def wait_for_text(log_path: Path, text: str, process: asyncio.subprocess.Process) -> None:
    """Until ``text`` is in the log (the process must keep running meanwhile)."""
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while text not in log_path.read_text():
        assert process.returncode is None, log_path.read_text()[-3000:]
        assert time.monotonic() < deadline, f"no {text!r} in time"
        await asyncio.sleep(0.1)


async def test_first_download_reports_progress_then_ready(tiny_codec_dir: Path, tmp_path: Path) -> None:
    """A Hub id not in the cache is downloaded (from the fake Hub, slowly) with JSON progress lines at most
    one a PROGRESS_INTERVAL_S, then a final one, then the server is ready."""
    repo = "owner/tiny-codec"
    served = padded_codec(tiny_codec_dir, tmp_path / "served", 40_000_000)
    hub = FakeHub(repos={repo: served}, chunk_bytes=1 << 20, chunk_delay_s=0.1)  # ~10 MB/s: ~4 s
    await hub.start()
    env = server_env(
        tmp_path, CODEC_MODEL=repo, HF_HUB_OFFLINE="0", HF_ENDPOINT=hub.url, PROGRESS_INTERVAL_S="0.5"
    )
    log_path = tmp_path / "stderr.log"
    try:
        process = await start_logging_to(log_path, env, tmp_path)
        try:
            await wait_for_text(log_path, READY, process)
        finally:
            process.terminate()
            await process.wait()
    finally:
        await hub.stop()
    records = [json.loads(line) for line in log_path.read_text().splitlines()]
    progress = [r for r in records if r["logger"] == "app.progress" and r["task"] == f"downloading {repo}"]
    moving = [r for r in progress if not r["final"]]
    assert len(moving) >= 3, progress
    percents = [r["percent"] for r in moving if r["percent"] is not None]
    assert percents == sorted(percents) and percents[-1] <= 100
    assert any(0 < p < 100 for p in percents), "a line while the download was under way"
    assert all(r["unit"] == "B" and r["done"] <= r["total"] for r in moving if r["total"])
    times = [r["elapsed_s"] for r in moving]
    assert all(later - earlier >= 0.4 for earlier, later in itertools.pairwise(times)), times
    assert progress[-1]["final"] and progress[-1]["message"].startswith(f"downloading {repo}: done in ")
    assert sum(1 for r in records if r["message"].startswith(READY)) == 1
    assert not any(r["logger"].startswith(("httpx", "httpcore")) for r in records), "no line per Hub request"
    assert any(r.startswith(f"GET /{repo}/resolve/") for r in hub.requests)


async def test_ctrl_c_during_a_download_exits_at_once(tiny_codec_dir: Path, tmp_path: Path) -> None:
    """uvicorn alone would finish the lifespan startup (the whole download) before acting on Ctrl-C."""
    repo = "owner/tiny-codec"
    served = padded_codec(tiny_codec_dir, tmp_path / "served", 40_000_000)
    hub = FakeHub(repos={repo: served}, chunk_bytes=1 << 20, chunk_delay_s=1.0)  # 1 MB/s: ~40 s
    await hub.start()
    env = server_env(tmp_path, CODEC_MODEL=repo, HF_HUB_OFFLINE="0", HF_ENDPOINT=hub.url)
    log_path = tmp_path / "stderr.log"
    try:
        process = await start_logging_to(log_path, env, tmp_path)
        try:
            await wait_for_text(log_path, f"downloading {repo}: ", process)
            process.send_signal(signal.SIGINT)
            signalled = time.monotonic()
            status = await asyncio.wait_for(process.wait(), 10)
            exited_after = time.monotonic() - signalled
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    finally:
        await hub.stop()
    assert status == 128 + signal.SIGINT
    assert exited_after < 5
    records = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert records[-1]["level"] == "warning"
    assert records[-1]["message"] == f"interrupted while starting (signal {int(signal.SIGINT)}): exiting now"
    assert "Traceback" not in log_path.read_text()
