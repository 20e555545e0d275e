"""``explain``: each kind of startup failure becomes one line naming the setting, the value and a remedy."""

from __future__ import annotations

import httpx2
import pytest
import torch
from huggingface_hub.errors import (
    GatedRepoError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
)
from pydantic import ValidationError

from app.core.device import resolve_device
from app.families.neucodec.codec.loading import CheckpointError
from app.observability.startup_errors import (
    INVALID_SETTINGS,
    STARTUP_FAILED,
    ModelSourceError,
    StartupError,
    explain,
    settings_problems,
)
from tests.conftest import make_settings


def hub_response(status: int) -> httpx2.Response:
    return httpx2.Response(status, request=httpx2.Request("GET", "https://hub.invalid/api/models/a/b"))


def raised_from(outer: Exception, inner: BaseException) -> Exception:
    """``outer`` as if raised ``from inner`` (the way the Hub client chains its errors)."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except Exception as chained:
        return chained


def test_line_names_setting_value_problem_and_remedy() -> None:
    error = StartupError("CODEC_MODEL", "x/y", "it broke", "Do this")
    assert str(error) == "cannot start: CODEC_MODEL='x/y': it broke. Do this."
    assert error.exit_code == STARTUP_FAILED != INVALID_SETTINGS
    assert explain(error) is error


def test_offline_hub() -> None:
    exc = raised_from(LocalEntryNotFoundError("no snapshot"), OfflineModeIsEnabled("offline"))
    line = str(explain(exc, "CODEC_MODEL", "neuphonic/neucodec"))
    assert line.startswith("cannot start: CODEC_MODEL='neuphonic/neucodec': not in the local Hugging Face")
    assert "HF_HUB_OFFLINE" in line and "local directory" in line and "`make demo`" in line


def test_unreachable_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    exc = raised_from(LocalEntryNotFoundError("Got: ConnectError"), httpx2.ConnectError("refused"))
    line = str(explain(exc, "TTS_MODEL", "a/b"))
    assert "TTS_MODEL='a/b': the Hugging Face Hub (http://127.0.0.1:9) cannot be reached" in line
    assert "`make demo`" in line


def test_gated_and_unknown_ids() -> None:
    gated = explain(GatedRepoError("403", response=hub_response(403)), "TTS_MODEL", "org/gated")
    assert "gated" in gated.problem and "https://huggingface.co/org/gated" in gated.remedy
    assert "HF_TOKEN" in gated.remedy
    missing = explain(RepositoryNotFoundError("404", response=hub_response(404)), "TTS_MODEL", "org/typo")
    assert "no such model on the Hugging Face Hub" in missing.problem
    assert "Check the id" in missing.remedy


def test_directory_without_the_files() -> None:
    error = explain(CheckpointError("no model.safetensors or pytorch_model.bin in /d"), "CODEC_MODEL", "/d")
    assert error.problem == "no model.safetensors or pytorch_model.bin in /d"
    assert "official layout" in error.remedy and "`make demo`" in error.remedy
    wrapped = raised_from(RuntimeError("load failed"), ModelSourceError("no config.json"))
    assert "official layout" in explain(wrapped, "TTS_MODEL", "/m").remedy


def test_out_of_memory_on_cpu_and_gpu() -> None:
    with pytest.raises(RuntimeError) as cpu:
        torch.empty(1 << 62, dtype=torch.uint8)  # the CPU allocator refuses 4.6 EB at once
    error = explain(cpu.value, "CODEC_MODEL", "/big")
    assert error.problem.startswith("out of memory while loading (it tried to allocate ")
    assert "DEVICE" in error.remedy and "bfloat16" in error.remedy
    gpu = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 8 GiB total)")
    problem = explain(gpu, "TTS_MODEL", "a/b").problem
    assert problem == "out of memory while loading (it tried to allocate 20.0 MiB)"
    assert explain(MemoryError(), "TTS_MODEL", "a/b").problem == "out of memory while loading"


def test_missing_devices() -> None:
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError) as cuda:
            resolve_device("cuda")
        error = explain(cuda.value, "DEVICE", "cuda")
        assert error.setting == "DEVICE" and "DEVICE=cpu" in error.remedy
    with pytest.raises((RuntimeError, ValueError)) as unknown:
        resolve_device("tpu")
    assert "DEVICE=cpu" in explain(unknown.value, "DEVICE", "tpu").remedy
    npu = explain(RuntimeError("device 'npu' needs the torch_npu package"), "DEVICE", "npu")
    assert "torch_npu" in npu.remedy and "requirements-npu.txt" in npu.remedy


def test_anything_else_names_the_exception_and_the_debug_log() -> None:
    error = explain(KeyError("boom"), "", "")
    assert str(error) == "cannot start: KeyError: 'boom'. LOG_LEVEL=debug prints the traceback."
    long = explain(ValueError("x" * 1000 + "\nsecond line"), "TTS_API", "u")
    assert len(str(long)) < 400 and "second line" not in str(long)


def test_invalid_settings_one_line_each() -> None:
    with pytest.raises(ValidationError) as invalid:
        make_settings(PORT="abc", LOG_FORMAT="xml")
    lines = settings_problems(invalid.value.errors())
    assert len(lines) == 2
    assert lines[0].startswith("invalid setting: PORT='abc': ")
    assert lines[1] == "invalid setting: LOG_FORMAT='xml': Input should be 'auto', 'json' or 'text'"
