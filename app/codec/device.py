"""Device selection for the codec: cuda, npu (Ascend, via torch_npu) and cpu behind one small interface.

Nothing happens at import: ``torch_npu`` is imported only when an npu device is asked for.
"""

from __future__ import annotations

import importlib
import re

import torch

_DEVICE_RE = re.compile(r"^(cpu|cuda|npu)(?::(\d+))?$")


def _require_npu() -> None:
    """Import ``torch_npu`` (it registers the ``npu`` device with torch) or explain what is missing."""
    try:
        importlib.import_module("torch_npu")
    except ImportError as exc:
        raise RuntimeError(
            "device 'npu' needs the torch_npu package (Ascend CANN toolkit); it is not installed"
        ) from exc


def resolve_device(name: str) -> torch.device:
    """Turn a setting into a device: "" = cuda if available else cpu; "cpu", "cuda[:N]", "npu[:N]".

    Raises ValueError for an unknown name and RuntimeError when the device is not usable here.
    """
    name = name.strip().lower()
    if not name:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    match = _DEVICE_RE.match(name)
    if match is None:
        raise ValueError(f"unknown codec device {name!r}: use '', 'cpu', 'cuda', 'cuda:N', 'npu' or 'npu:N'")
    kind, index = match.group(1), match.group(2)
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"codec device {name!r} requested but CUDA is not available")
        if index is not None and int(index) >= torch.cuda.device_count():
            raise RuntimeError(f"codec device {name!r}: only {torch.cuda.device_count()} CUDA device(s)")
    elif kind == "npu":
        _require_npu()
        if not torch.npu.is_available():  # type: ignore[attr-defined]
            raise RuntimeError(f"codec device {name!r} requested but no NPU is available")
    return torch.device(name)


def _backend(device: torch.device) -> object | None:
    """The ``torch.cuda``-like module of an accelerator device, None for cpu."""
    if device.type == "cpu":
        return None
    return getattr(torch, device.type)


def set_current(device: torch.device) -> None:
    """Make ``device`` the current accelerator of the calling thread (no-op on cpu)."""
    backend = _backend(device)
    if backend is not None and device.index is not None:
        backend.set_device(device)  # type: ignore[attr-defined]


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on ``device`` (no-op on cpu)."""
    backend = _backend(device)
    if backend is not None:
        backend.synchronize(device)  # type: ignore[attr-defined]
