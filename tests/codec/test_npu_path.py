"""The npu path, driven by a stand-in ``torch_npu``: device resolution, streams and events through the
``torch.npu`` API (copy on the copy stream, compute waiting on its event), no CUDA graphs.

The stand-in mirrors the part of ``torch.npu`` we use (Stream, Event, stream(), set_device, synchronize,
is_available). Tensors stay on the host: a CPU-only torch cannot allocate on a fake device, so the test's
``DeviceOps`` keeps ``to_device`` and pinning on the host; everything else runs as on an Ascend card.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import types
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from app.codec.device import DeviceOps, resolve_device
from app.codec.neucodec.decoder import NeuCodecDecoder
from app.codec.worker import CodecOptions, CodecWorker


class FakeNpu(types.SimpleNamespace):
    """Records every stream/event call in ``log`` as (what, stream name)."""

    def __init__(self) -> None:
        log: list[tuple[str, str]] = []
        names = iter(f"stream{i}" for i in range(100))
        current: list[str] = ["default"]

        class Stream:
            def __init__(self, device: torch.device | None = None) -> None:
                self.name = next(names)
                log.append(("new", self.name))

            def wait_event(self, event: Event) -> None:
                log.append(("wait", f"{self.name}<-{event.stream}"))

        class Event:
            def record(self, stream: Stream) -> None:
                self.stream = stream.name
                log.append(("record", stream.name))

        @contextlib.contextmanager
        def stream(s: Stream) -> Iterator[None]:
            current.append(s.name)
            log.append(("enter", s.name))
            try:
                yield
            finally:
                current.pop()

        super().__init__(
            log=log,
            current=current,
            Stream=Stream,
            Event=Event,
            stream=stream,
            is_available=lambda: True,
            set_device=lambda device: log.append(("set_device", str(device))),
            synchronize=lambda device=None: log.append(("synchronize", "")),
        )


class HostBackedNpu(DeviceOps):
    """npu ops whose tensors live on the host; records what was copied on which stream."""

    def __init__(self, device: torch.device, npu: FakeNpu) -> None:
        super().__init__(device)
        self.npu = npu

    def pinned(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype)

    def to_device(self, host: torch.Tensor) -> torch.Tensor:
        self.npu.log.append(("copy", self.npu.current[-1]))
        return host.clone()

    def used_on(self, tensor: torch.Tensor, stream: object) -> None:
        self.npu.log.append(("used_on", stream.name))  # type: ignore[attr-defined]


@pytest.fixture
def fake_npu(monkeypatch: pytest.MonkeyPatch) -> FakeNpu:
    npu = FakeNpu()
    monkeypatch.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu"))
    monkeypatch.setattr(torch, "npu", npu, raising=False)
    if torch._C._get_privateuse1_backend_name() != "npu":
        torch.utils.rename_privateuse1_backend("npu")  # what importing torch_npu does
    return npu


def test_resolve_npu_imports_torch_npu_and_checks_availability(fake_npu: FakeNpu) -> None:
    assert resolve_device("npu:0") == torch.device("npu:0")
    fake_npu.is_available = lambda: False
    with pytest.raises(RuntimeError, match="no NPU is available"):
        resolve_device("npu")


async def test_decode_on_npu_streams_matches_cpu(fake_npu: FakeNpu, tiny_decoder: NeuCodecDecoder) -> None:
    ops = HostBackedNpu(resolve_device("npu:0"), fake_npu)
    assert ops.is_accelerator and not ops.supports_graphs
    worker = CodecWorker(tiny_decoder, ops, options=CodecOptions(cuda_graphs=True, window_s=0.05))
    assert worker.runner.graphs is None  # graphs are cuda-only
    worker.start()
    codes = [[(i * 7919 + j * 104729) % 65536 for j in range(9)] for i in range(3)]
    try:
        results = await asyncio.gather(*(worker.decode(c) for c in codes))
    finally:
        await worker.close()
    for window, audio in zip(codes, results, strict=True):
        with torch.inference_mode():
            expected = tiny_decoder(torch.tensor([window]))[0].numpy()
        np.testing.assert_allclose(audio, expected, atol=1e-5)
    log = fake_npu.log
    assert log.count(("set_device", "npu:0")) == 2  # collector and worker threads
    copy_stream, compute_stream = [name for what, name in log if what == "new"][:2]
    assert ("copy", copy_stream) in log  # the host-to-device copy is queued on the copy stream
    first_copy = log.index(("copy", copy_stream))
    recorded = log.index(("record", copy_stream), first_copy)
    waited = log.index(("wait", f"{compute_stream}<-{copy_stream}"), recorded)
    assert log.index(("used_on", compute_stream)) > waited  # compute starts after the copy's event
