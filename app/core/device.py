"""Device selection and the small device interface the codec runs on: cuda, npu (Ascend) and cpu.

``resolve_device`` turns the ``DEVICE`` setting into a ``torch.device``. ``DeviceOps`` is what the codec
batcher needs from a device, the same for all three: streams (a copy stream and a compute stream on an
accelerator; none on cpu), events to order them, pinned host memory, synchronisation, and whether CUDA
graphs can be captured (cuda only). ``torch.npu`` (registered by ``torch_npu``) mirrors ``torch.cuda``'s
stream, event and synchronize API, so one implementation serves both accelerators.

Nothing happens at import: ``torch_npu`` is imported only when an npu device is asked for.
"""

from __future__ import annotations

import contextlib
import importlib
import re
from typing import Any

import torch

_DEVICE_RE = re.compile(r"(cpu|cuda|npu)(?::(\d+))?")


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
    match = _DEVICE_RE.fullmatch(name)
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
        if not torch.npu.is_available():  # type: ignore[attr-defined]  # torch_npu adds torch.npu
            raise RuntimeError(f"codec device {name!r} requested but no NPU is available")
    return torch.device(name)


def _backend(device: torch.device) -> Any:
    """The ``torch.cuda``-like module of an accelerator device, None for cpu."""
    if device.type == "cpu":
        return None
    return getattr(torch, device.type)


def set_current(device: torch.device) -> None:
    """Make ``device`` the current accelerator of the calling thread (no-op on cpu)."""
    backend = _backend(device)
    if backend is not None and device.index is not None:
        backend.set_device(device)


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on ``device`` (no-op on cpu)."""
    backend = _backend(device)
    if backend is not None:
        backend.synchronize(device)


class DeviceOps:
    """Streams, events, pinned memory and graph support of one device, behind one interface.

    On cpu every stream is None, every event is None, contexts are empty and nothing is pinned: the
    callers write one code path and the cpu simply runs it synchronously.
    """

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self._backend = _backend(self.device)

    @property
    def kind(self) -> str:
        """``cpu``, ``cuda`` or ``npu``."""
        return self.device.type

    @property
    def is_accelerator(self) -> bool:
        """True on cuda and npu: copies are asynchronous and host buffers are worth pinning."""
        return self._backend is not None

    @property
    def supports_graphs(self) -> bool:
        """CUDA graphs: cuda only (npu runs eagerly on its streams)."""
        return self.kind == "cuda"

    def bind_thread(self) -> None:
        """Make this device current for the calling thread."""
        set_current(self.device)

    def new_stream(self) -> Any:
        """A new stream on the device, None on cpu."""
        return None if self._backend is None else self._backend.Stream(device=self.device)

    def on(self, stream: Any) -> contextlib.AbstractContextManager[Any]:
        """Context in which queued work goes to ``stream`` (an empty context for None)."""
        if self._backend is None or stream is None:
            return contextlib.nullcontext()
        return self._backend.stream(stream)

    def record(self, stream: Any) -> Any:
        """An event recorded on ``stream`` now (None on cpu)."""
        if self._backend is None or stream is None:
            return None
        event = self._backend.Event()
        event.record(stream)
        return event

    def wait(self, stream: Any, event: Any) -> None:
        """Make ``stream`` wait for ``event`` without blocking the host (no-op on cpu)."""
        if stream is not None and event is not None:
            stream.wait_event(event)

    def pinned(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A host buffer: page-locked on an accelerator (fast, asynchronous copies), plain on cpu."""
        return torch.empty(shape, dtype=dtype, pin_memory=self.is_accelerator)

    def to_device(self, host: torch.Tensor) -> torch.Tensor:
        """``host`` on the device, copied asynchronously on the current stream (itself on cpu)."""
        return host.to(self.device, non_blocking=True)

    def used_on(self, tensor: torch.Tensor, stream: Any) -> None:
        """Tell the caching allocator that ``tensor``, made on another stream, is used on ``stream``."""
        if stream is not None:
            tensor.record_stream(stream)
