"""``make demo`` as a newcomer runs it: the fixtures tool writes the tiny checkpoints, the server starts with
the Makefile's ``DEMO_ENV`` (read from the Makefile itself) and serves both model families offline, the
"Try:" command of its ready line works as printed, and a request without ``max_tokens`` ends after a few
seconds of audio for each family (the checkpoints' planted stop)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import soundfile

from app.config import Settings
from tests.observability.test_first_run import closed_port
from tests.observability.test_first_run_ready import READY, STARTUP_DEADLINE_S, stop

pytestmark = pytest.mark.slow  # writes the fixtures and starts a server with four models

REPO = Path(__file__).resolve().parents[2]
SHORTEST_S, LONGEST_S = 2.0, 5.0  # what the planted stop promises, for both families
TRY_DEADLINE_S = 20.0  # "a few seconds": about 1 s on an idle 2-core machine


def make_variables(makefile: Path) -> dict[str, str]:
    """The simple variable definitions of ``makefile`` (``:=``, ``?=``, ``=``), continuation lines
    joined, values unexpanded."""
    text = re.sub(r"\\\n\s*", " ", makefile.read_text())
    variables = {}
    for line in text.splitlines():
        found = re.match(r"^([A-Z_]+)\s*[:?]?=\s*(.*)$", line)
        if found:
            variables[found.group(1)] = found.group(2).strip()
    return variables


def expand(value: str, variables: dict[str, str]) -> str:
    """``value`` with every ``$(NAME)`` replaced, recursively."""
    return re.sub(r"\$\((\w+)\)", lambda m: expand(variables[m.group(1)], variables), value)


def demo_env(fixtures: Path) -> dict[str, str]:
    """The Makefile's ``DEMO_ENV`` with ``FIXTURES`` at ``fixtures``."""
    variables = make_variables(REPO / "Makefile") | {"FIXTURES": str(fixtures)}
    pairs = expand(variables["DEMO_ENV"], variables).split()
    return dict(pair.split("=", 1) for pair in pairs)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, object]]]:
    """The demo server: its working directory and its ready record."""
    home = tmp_path_factory.mktemp("demo")
    written = subprocess.run(
        [sys.executable, "-m", "app.tools.fixtures", "--out", str(home / ".fixtures")],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    printed = [line for line in written.stdout.splitlines() if line.startswith(("lm:", "moss_tts:"))]
    assert len(printed) == 2 and all("random weights" in line and "planted stop" in line for line in printed)
    inherited = {
        key: value
        for key, value in os.environ.items()
        if key not in Settings.model_fields and not key.startswith(("HF_", "TRANSFORMERS_"))
    }
    port = closed_port()
    env = {
        **inherited,
        "PYTHONPATH": str(REPO),
        "HF_HOME": str(home / "hf-home"),
        **demo_env(home / ".fixtures"),
        "HOST": "127.0.0.1",
        "PORT": str(port),
    }
    log_path = home / "stderr.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "app"], env=env, cwd=home, stdout=subprocess.DEVNULL, stderr=log_file
        )
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while READY not in log_path.read_text():
            assert process.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, "not ready in time"
            time.sleep(0.2)
        records = [json.loads(line) for line in log_path.read_text().splitlines()]
        yield home, next(r for r in records if r["message"].startswith(READY))
    finally:
        stop(process)


def wav_seconds(data: bytes) -> float:
    samples, rate = soundfile.read(io.BytesIO(data))
    return len(samples) / rate


def test_the_demo_serves_both_families_offline(demo: tuple[Path, dict[str, object]]) -> None:
    _, ready = demo
    models = ready["models"]
    assert isinstance(models, list)
    assert {Settings.model_fields[name].default for name in ("MODEL_NAME", "MOSS_MODEL_NAME")} <= set(models)


def test_the_try_line_works_as_printed(demo: tuple[Path, dict[str, object]]) -> None:
    home, ready = demo
    message = ready["message"]
    assert isinstance(message, str)
    command = message.split("Try: ", 1)[1]
    assert command == ready["example"]
    started = time.monotonic()
    done = subprocess.run(command, shell=True, cwd=home, capture_output=True, timeout=60)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert SHORTEST_S <= wav_seconds((home / "hello.wav").read_bytes()) <= LONGEST_S
    assert took < TRY_DEADLINE_S


def test_a_moss_request_without_max_tokens_ends_in_a_few_seconds(
    demo: tuple[Path, dict[str, object]],
) -> None:
    _, ready = demo
    body = {
        "model": Settings.model_fields["MOSS_MODEL_NAME"].default,
        "input": "The other family speaks too.",
        "response_format": "wav",
        "stream": False,
    }
    response = httpx.post(f"{ready['url']}/v1/audio/speech", json=body, timeout=60)
    assert response.status_code == 200, response.text
    assert SHORTEST_S <= wav_seconds(response.content) <= LONGEST_S
