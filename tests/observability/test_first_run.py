"""``python -m app`` as a newcomer runs it: each startup failure ends the process with one line naming the
setting, its value and what to do, a non-zero exit status and no traceback (at the default log level).

The Hub is never contacted: it is offline (``HF_HUB_OFFLINE=1``), unreachable (``HF_ENDPOINT`` on a
closed port of 127.0.0.1) or a local fake that refuses like the Hub does (``tests/fakes/fake_hub.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from app.config import Settings
from app.core.settings import env_names
from app.observability.startup_errors import INVALID_SETTINGS, STARTUP_FAILED
from tests.fakes.fake_hub import FakeHub

pytestmark = pytest.mark.slow  # each case is a server subprocess: torch import and codec load take seconds

REPO = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    """The environment of a server subprocess: no setting or HF_* variable inherited, a fresh empty
    Hugging Face cache, the Hub offline, the http LM backend (nothing to load) and the CPU."""
    inherited = {
        key: value
        for key, value in os.environ.items()
        if key not in env_names(Settings) and not key.startswith(("HF_", "TRANSFORMERS_"))
    }
    return {
        **inherited,
        "PYTHONPATH": str(REPO),
        "HF_HOME": str(tmp_path / "hf-home"),
        "HF_HUB_OFFLINE": "1",
        "LM_BACKEND": "http",
        "TTS_API": f"http://127.0.0.1:{closed_port()}",
        "DEVICE": "cpu",
        "REFERENCE_VOICES": "false",
        "HOST": "127.0.0.1",
        "PORT": str(closed_port()),
        "VOICES_DIR": str(tmp_path / "voices"),
        "INTERLEAVE_STORE": "memory",
        **overrides,
    }


@dataclass
class Exit:
    """How a server process ended: its status and its stderr, as text and as parsed JSON lines."""

    status: int
    stderr: str

    @property
    def records(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.stderr.splitlines() if line.startswith("{")]

    @property
    def errors(self) -> list[str]:
        return [str(r["message"]) for r in self.records if r["level"] in ("error", "critical")]


async def run_server(env: dict[str, str], cwd: Path, timeout_s: float = 120) -> Exit:
    """Run ``python -m app`` with stderr on a pipe (so LOG_FORMAT=auto is JSON) until it exits."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        env=env,
        cwd=cwd,  # no .env file here
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), timeout_s)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return Exit(process.returncode, stderr.decode())


def assert_one_line_failure(result: Exit, *parts: str) -> str:
    """Exit status 3, exactly one error record containing every part, no traceback anywhere."""
    assert result.status == STARTUP_FAILED, result.stderr[-3000:]
    assert len(result.errors) == 1, result.errors
    line = result.errors[0]
    assert line.startswith("cannot start: ") and "\n" not in line
    for part in parts:
        assert part in line, line
    assert "Traceback" not in result.stderr
    assert all(line.startswith("{") for line in result.stderr.splitlines()), "every stderr line is JSON"
    return line


def oversized_codec(tiny_codec_dir: Path, tmp_path: Path) -> Path:
    """The tiny checkpoint with a config whose decoder needs about 100 TB: its load runs out of memory."""
    directory = tmp_path / "oversized"
    shutil.copytree(tiny_codec_dir, directory)
    config_path = directory / "neucodec_config.json"
    config = json.loads(config_path.read_text())
    config.update(hidden_dim=1 << 21, heads=16)
    config_path.write_text(json.dumps(config))
    return directory


async def test_hub_offline_and_model_not_cached(tmp_path: Path) -> None:
    result = await run_server(server_env(tmp_path, CODEC_MODEL="neuphonic/neucodec"), tmp_path)
    assert_one_line_failure(
        result,
        "CODEC_MODEL='neuphonic/neucodec': not in the local Hugging Face cache",
        "HF_HUB_OFFLINE",
        "local directory",
        "`make demo`",
    )


async def test_hub_unreachable(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    env = server_env(tmp_path, CODEC_MODEL="neuphonic/neucodec", HF_HUB_OFFLINE="0", HF_ENDPOINT=endpoint)
    assert_one_line_failure(
        await run_server(env, tmp_path),
        f"CODEC_MODEL='neuphonic/neucodec': the Hugging Face Hub ({endpoint}) cannot be reached",
        "`make demo`",
    )


@pytest.mark.parametrize(
    ("refusal", "expected"),
    [
        ("not_found", "no such model on the Hugging Face Hub"),
        ("gated", "the model is gated on the Hugging Face"),
    ],
)
async def test_misspelled_or_gated_hub_id(refusal: str, expected: str, tmp_path: Path) -> None:
    hub = FakeHub(refusal)
    await hub.start()
    try:
        env = server_env(tmp_path, CODEC_MODEL="someone/neucodek", HF_HUB_OFFLINE="0", HF_ENDPOINT=hub.url)
        result = await run_server(env, tmp_path)
    finally:
        await hub.stop()
    assert hub.requests, "the fake Hub was asked"
    assert_one_line_failure(result, f"CODEC_MODEL='someone/neucodek': {expected}", "HF_TOKEN")


async def test_missing_local_directory(tmp_path: Path) -> None:
    missing = str(tmp_path / "no" / "such" / "dir")
    result = await run_server(server_env(tmp_path, CODEC_MODEL=missing), tmp_path)
    assert_one_line_failure(result, f"CODEC_MODEL={missing!r}:", "neither a directory nor", "`make demo`")


async def test_codec_directory_without_the_checkpoint(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = await run_server(server_env(tmp_path, CODEC_MODEL=str(empty)), tmp_path)
    assert_one_line_failure(
        result, f"CODEC_MODEL='{empty}': no model.safetensors or pytorch_model.bin", "official layout"
    )


async def test_lm_directory_without_the_model_files(tiny_codec_dir: Path, tmp_path: Path) -> None:
    lm_dir = tmp_path / "lm"
    lm_dir.mkdir()
    (lm_dir / "config.json").write_text("{}")
    env = server_env(
        tmp_path, LM_BACKEND="transformers", TTS_MODEL=str(lm_dir), CODEC_MODEL=str(tiny_codec_dir)
    )
    assert_one_line_failure(
        await run_server(env, tmp_path),
        f"TTS_MODEL='{lm_dir}': the directory {lm_dir} has no *.safetensors, no tokenizer.json or",
        "official layout",
    )


async def test_out_of_memory_load(tiny_codec_dir: Path, tmp_path: Path) -> None:
    big = oversized_codec(tiny_codec_dir, tmp_path)
    result = await run_server(server_env(tmp_path, CODEC_MODEL=str(big)), tmp_path)
    assert_one_line_failure(
        result, f"CODEC_MODEL='{big}': out of memory while loading (it tried to allocate", "DEVICE"
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is present here")
async def test_cuda_without_cuda(tiny_codec_dir: Path, tmp_path: Path) -> None:
    result = await run_server(server_env(tmp_path, DEVICE="cuda", CODEC_MODEL=str(tiny_codec_dir)), tmp_path)
    assert_one_line_failure(result, "DEVICE='cuda': ", "CUDA is not available", "Set DEVICE=cpu")


async def test_npu_without_torch_npu(tiny_codec_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="torch is needed")  # torch_npu is never installed on CPU hosts
    if __import__("importlib").util.find_spec("torch_npu") is not None:
        pytest.skip("torch_npu is installed here")
    result = await run_server(server_env(tmp_path, DEVICE="npu", CODEC_MODEL=str(tiny_codec_dir)), tmp_path)
    assert_one_line_failure(result, "DEVICE='npu': ", "torch_npu", "requirements-npu.txt")


async def test_invalid_settings_exit_2_with_one_line_each(tmp_path: Path) -> None:
    result = await run_server(server_env(tmp_path, PORT="abc", LOG_FORMAT="xml"), tmp_path)
    assert result.status == INVALID_SETTINGS
    assert result.stderr.splitlines() == [
        "invalid setting: PORT='abc': Input should be a valid integer, unable to parse string as an integer",
        "invalid setting: LOG_FORMAT='xml': Input should be 'auto', 'json' or 'text'",
    ]


async def test_debug_level_logs_the_traceback(tmp_path: Path) -> None:
    env = server_env(tmp_path, CODEC_MODEL="neuphonic/neucodec", LOG_LEVEL="debug")
    result = await run_server(env, tmp_path)
    assert result.status == STARTUP_FAILED
    assert len(result.errors) == 1
    debug = [r for r in result.records if r["message"] == "startup traceback"]
    assert len(debug) == 1 and debug[0]["level"] == "debug"
    assert "LocalEntryNotFoundError" in str(debug[0]["exception"])
