"""resolve_device: the DEVICE setting to a torch.device, with clear errors for what is not here."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from app.core.device import resolve_device, set_current, synchronize


@pytest.mark.parametrize("available", [True, False])
def test_auto_picks_cuda_when_available(monkeypatch: pytest.MonkeyPatch, available: bool) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    assert resolve_device("") == torch.device("cuda" if available else "cpu")
    assert resolve_device("  ") == resolve_device("")


def test_cpu() -> None:
    device = resolve_device("CPU")
    assert device == torch.device("cpu")
    set_current(device)  # no-ops on cpu
    synchronize(device)


@pytest.mark.parametrize("name", ["gpu", "cuda:x", "cuda:0:1", "tpu", "mps"])
def test_unknown_names_are_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="unknown codec device"):
        resolve_device(name)


def test_cuda_without_cuda_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        resolve_device("cuda:0")


@pytest.mark.skipif(importlib.util.find_spec("torch_npu") is not None, reason="torch_npu is installed")
def test_npu_without_torch_npu_explains_what_is_missing() -> None:
    with pytest.raises(RuntimeError, match="torch_npu"):
        resolve_device("npu:0")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_index_is_checked() -> None:
    assert resolve_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(RuntimeError, match="CUDA device"):
        resolve_device(f"cuda:{torch.cuda.device_count()}")
