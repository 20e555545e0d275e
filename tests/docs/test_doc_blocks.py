"""Every shell and Python block of README.md and docs/ runs as printed against the demo server.

The blocks of one document run in order in one scratch directory (a later block may use a file an
earlier one wrote), with the docs' address ``localhost:9091`` replaced by the demo server's and its
virtualenv first on ``PATH``. A block passes when it exits 0 within :data:`BLOCK_TIMEOUT_S`, every
request it sent got an answer below 400, and every audio file it wrote holds audio. Blocks marked as
needing what this machine lacks are not run; blocks that start a server are run until it is ready
(``tests/docs/blocks.py`` has the rules)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import av
import pytest
import soundfile

from tests.docs.blocks import PYTHON, ROOT, SHELL, Block, blocks, documents
from tests.docs.conftest import DemoServer, free_port, stop, wait_ready, with_venv

pytestmark = pytest.mark.slow

# Generous while the fixture LMs rarely stop by themselves; a block on the capped demo server takes
# seconds.
BLOCK_TIMEOUT_S = 120
DOC_ADDRESSES = ("http://localhost:9091", "localhost:9091", "127.0.0.1:9091")
AUDIO_SUFFIXES = frozenset({".wav", ".flac", ".ogg", ".opus", ".mp3", ".aac", ".pcm"})


def runnable_documents() -> list[Path]:
    return [path for path in documents() if any(block.runnable for block in blocks(path))]


def with_address(text: str, url: str) -> str:
    for address in DOC_ADDRESSES:
        text = text.replace(address, url if address.startswith("http") else url.removeprefix("http://"))
    return text


def block_environment(server: DemoServer, **extra: str) -> dict[str, str]:
    return with_venv(dict(os.environ)) | {"TTS_API_BASE_URL": server.url, **extra}


def command(block: Block, text: str) -> list[str]:
    if block.language in SHELL:
        return ["bash", "-e", "-o", "pipefail", "-c", text]
    assert block.language in PYTHON
    return [sys.executable, "-c", text]


def audio_files(root: Path) -> dict[Path, tuple[int, int]]:
    """Audio files under ``root`` (not through its links into the checkout) with their size and mtime."""
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = Path(directory) / name
            if path.suffix in AUDIO_SUFFIXES and not path.is_symlink():
                stat = path.stat()
                found[path] = (stat.st_size, stat.st_mtime_ns)
    return found


def audio_problem(path: Path) -> str | None:
    """Why ``path`` does not hold audio of its kind, or None when it does."""
    data = path.read_bytes()
    if not data:
        return "empty"
    if path.suffix == ".pcm":
        return None if len(data) % 2 == 0 else "not whole 16-bit samples"
    if path.suffix in {".wav", ".flac"}:
        try:
            frames = soundfile.info(io.BytesIO(data)).frames
        except RuntimeError as exc:
            return f"unreadable: {exc}"
        return None if frames > 0 else "no samples"
    try:
        with av.open(io.BytesIO(data)) as container:
            decoded = sum(frame.samples for frame in container.decode(audio=0))
    except (av.FFmpegError, IndexError) as exc:
        return f"undecodable: {exc}"
    return None if decoded > 0 else "no samples"


def run_block(block: Block, cwd: Path, server: DemoServer) -> None:
    before = audio_files(cwd)
    process = subprocess.Popen(
        command(block, with_address(block.text, server.url)),
        cwd=cwd,
        env=block_environment(server),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = process.communicate(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: still running after {BLOCK_TIMEOUT_S} s")
    finally:
        stop(process, grace_s=5)  # whatever the block left running in the background
    output = out.decode("utf-8", "replace")[-4000:]
    assert process.returncode == 0, f"{block.where}: exit status {process.returncode}\n{output}"
    errors = server.new_errors()
    assert not errors, f"{block.where}: requests answered with an error: {errors}\n{output}"
    written = {path for path, stat in audio_files(cwd).items() if before.get(path) != stat}
    problems = {str(path.relative_to(cwd)): audio_problem(path) for path in sorted(written)}
    assert not any(problems.values()), f"{block.where}: audio files without audio: {problems}"


def run_server_block(block: Block, cwd: Path, server: DemoServer) -> None:
    """Start the block's server on a free port, wait until it is ready, stop it."""
    port = free_port()
    log = cwd / f"server-{block.line}.log"
    env = block_environment(server, HOST="127.0.0.1", PORT=str(port))
    with log.open("wb") as out:
        process = subprocess.Popen(
            command(block, block.text), cwd=cwd, env=env, stdout=out, stderr=out, start_new_session=True
        )
    try:
        ready = wait_ready(f"http://127.0.0.1:{port}", process)
    finally:
        stop(process)
    tail = log.read_text(encoding="utf-8", errors="replace")[-4000:]
    assert ready, f"{block.where}: the server it starts never answered /ready with 200 on PORT={port}\n{tail}"


@pytest.mark.parametrize("path", runnable_documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_blocks_run_as_printed(path: Path, workspace: Path, demo_server: DemoServer) -> None:
    for block in blocks(path):
        if not block.runnable:
            continue
        started = time.perf_counter()
        if block.starts:
            run_server_block(block, workspace, demo_server)
        else:
            run_block(block, workspace, demo_server)
        print(f"{block.where}: {time.perf_counter() - started:.1f} s")  # shown with pytest -s
