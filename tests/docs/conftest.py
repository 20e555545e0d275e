"""The demo server the documentation's blocks run against, and the scratch directory they run in."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.docs.blocks import ROOT

# Entries of the checkout a scratch directory does not link: git's own, a developer's settings (a
# server started there would read them), checkpoints (the session's fixtures stand in) and voices.
NOT_LINKED = frozenset({".git", ".env", ".fixtures", "voices"})
READY_TIMEOUT_S = 180.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout_s: float = READY_TIMEOUT_S) -> bool:
    """Poll ``url``/ready until it answers 200 (True), ``process`` exits or the time is up (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/ready", timeout=2) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.3)
    return False


def stop(process: subprocess.Popen[bytes], grace_s: float = 30.0) -> None:
    """SIGTERM to the process group of ``process`` (started with ``start_new_session``: a shell, make and
    the server under it), then wait until every member has gone, SIGKILL after ``grace_s``."""
    group = process.pid
    try:
        os.killpg(group, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        process.poll()  # reap the leader, so that the group empties
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    process.wait()


def with_venv(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this interpreter's directory first on ``PATH``, so ``python`` is the virtualenv's."""
    return env | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"}


@dataclass
class DemoServer:
    """``python -m app`` on the tiny fixtures, both families, logging JSON lines to ``log``."""

    url: str
    port: int
    log: Path
    _offset: int = field(default=0, repr=False)

    def new_errors(self) -> list[str]:
        """Access lines with a status of 400 or more logged since the last call."""
        with self.log.open("rb") as file:
            file.seek(self._offset)
            data = file.read()
        self._offset += len(data)
        errors = []
        for line in data.decode("utf-8", "replace").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("logger") == "app.access" and int(record.get("status") or 0) >= 400:
                errors.append(f"{record['message']} ({record.get('error')})")
        return errors

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]


def demo_environment(fixtures: Path, **extra: str) -> dict[str, str]:
    """The environment of ``make demo`` with both families on the checkpoints in ``fixtures``."""
    return with_venv(dict(os.environ)) | {
        "LM_BACKEND": "transformers",
        "TTS_MODEL": str(fixtures / "lm"),
        "CODEC_MODEL": str(fixtures / "codec"),
        "MODEL_FAMILIES": "neucodec,moss",
        "MOSS_TTS_MODEL": str(fixtures / "moss_tts"),
        "MOSS_CODEC_MODEL": str(fixtures / "moss_codec"),
        "DEVICE": "cpu",
        **extra,
    }


@pytest.fixture(scope="session")
def demo_fixtures(
    tmp_path_factory: pytest.TempPathFactory,
    tiny_lm_dir: Path,
    tiny_codec_dir: Path,
    moss_tts_dir: Path,
    tiny_moss_codec_dir: Path,
) -> Path:
    """A directory laid out as ``make demo``'s ``.fixtures/``, linking the session's checkpoints."""
    root = tmp_path_factory.mktemp("demo_fixtures")
    for name, target in {
        "lm": tiny_lm_dir,
        "codec": tiny_codec_dir,
        "moss_tts": moss_tts_dir,
        "moss_codec": tiny_moss_codec_dir,
    }.items():
        (root / name).symlink_to(target, target_is_directory=True)
    return root


@pytest.fixture(scope="session")
def demo_server(tmp_path_factory: pytest.TempPathFactory, demo_fixtures: Path) -> Iterator[DemoServer]:
    """The demo server, started once for every document's blocks.

    The fixture LMs' random weights rarely sample their stop token, so a request without ``max_tokens``
    would run to the default 3072 tokens (a minute of noise); the caps below keep such a request to a
    few seconds of audio without changing any documented command."""
    state = tmp_path_factory.mktemp("demo_server")
    port = free_port()
    log = state / "server.log"
    env = demo_environment(
        demo_fixtures,
        HOST="127.0.0.1",
        PORT=str(port),
        LOG_FORMAT="json",
        VOICES_DIR=str(state / "voices"),
        INTERLEAVE_STORE_DIR=str(state / "interleave"),
        DEFAULT_MAX_TOKENS="200",
        MOSS_DEFAULT_MAX_TOKENS="25",
    )
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app"], cwd=ROOT, env=env, stdout=out, stderr=out, start_new_session=True
        )
    server = DemoServer(f"http://127.0.0.1:{port}", port, log)
    try:
        if not wait_ready(server.url, process):
            pytest.fail(f"the demo server did not become ready; its log:\n{server.log_tail()}")
        server.new_errors()  # start counting after startup
        yield server
    finally:
        stop(process)


@pytest.fixture
def workspace(tmp_path: Path, demo_fixtures: Path) -> Path:
    """A scratch directory that looks like the checkout: links to its entries, ``.fixtures`` linking the
    session's checkpoints, so a block's relative paths work and the files it writes land here."""
    for entry in ROOT.iterdir():
        if entry.name not in NOT_LINKED:
            (tmp_path / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    (tmp_path / ".fixtures").symlink_to(demo_fixtures, target_is_directory=True)
    return tmp_path
