"""A successful ``python -m app`` as a newcomer sees it: LOG_FORMAT=auto is readable text on a terminal
(a pseudo-terminal here) and JSON on a pipe, uvicorn's lines included and without colour codes, and
one "ready" line names the URL, the models, the voices and a curl example."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.observability.test_first_run import server_env

pytestmark = pytest.mark.slow  # a server subprocess: torch import and codec load take seconds

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
READY = "ready on http://127.0.0.1:"
STARTUP_DEADLINE_S = 120


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
        while b"does not answer yet" not in seen and time.monotonic() < deadline:
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
        while "does not answer yet" not in log_path.read_text() and time.monotonic() < deadline:
            assert process.poll() is None, log_path.read_text()[-3000:]
            time.sleep(0.2)
    finally:
        stop(process)
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
