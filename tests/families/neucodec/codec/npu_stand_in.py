"""A stand-in ``torch_npu`` and the npu-path checks it drives, run as ``python -m
tests.families.neucodec.codec.npu_stand_in
{resolve|decode}`` in a subprocess (installing it renames torch's private backend to "npu" for good,
which must not leak into the rest of the suite).

The stand-in mirrors the part of ``torch.npu`` we use (Stream, Event, stream(), set_device, synchronize,
is_available). Tensors stay on the host: a CPU-only torch cannot allocate on a fake device, so the
checks' ``DeviceOps`` keeps ``to_device`` and pinning on the host; everything else runs as on an Ascend
card.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import types
from collections.abc import Iterator

import numpy as np
import torch

from app.core.device import DeviceOps, resolve_device
from app.families.neucodec.codec.worker import CodecOptions, CodecWorker
from app.families.neucodec.fixtures.codec import random_decoder


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
        self.npu.log.append(("used_on", stream.name))


def install() -> FakeNpu:
    """What importing torch_npu does: a ``torch.npu`` module and the "npu" device name."""
    npu = FakeNpu()
    sys.modules["torch_npu"] = types.ModuleType("torch_npu")
    torch.npu = npu
    torch.utils.rename_privateuse1_backend("npu")
    return npu


def check_resolve(npu: FakeNpu) -> None:
    assert resolve_device("npu:0") == torch.device("npu:0")
    npu.is_available = lambda: False
    try:
        resolve_device("npu")
    except RuntimeError as exc:
        assert "no NPU is available" in str(exc)
    else:
        raise AssertionError("an unavailable npu was accepted")


async def check_decode(npu: FakeNpu) -> None:
    decoder = random_decoder()
    ops = HostBackedNpu(resolve_device("npu:0"), npu)
    assert ops.is_accelerator and not ops.supports_graphs
    worker = CodecWorker(decoder, ops, options=CodecOptions(cuda_graphs=True, window_s=0.05))
    assert worker.runner.graphs is None  # graphs are cuda-only
    worker.start()
    codes = [[(i * 7919 + j * 104729) % 65536 for j in range(9)] for i in range(3)]
    try:
        results = await asyncio.gather(*(worker.decode(c) for c in codes))
    finally:
        await worker.close()
    for window, audio in zip(codes, results, strict=True):
        with torch.inference_mode():
            expected = decoder(torch.tensor([window]))[0].numpy()
        np.testing.assert_allclose(audio, expected, atol=1e-5)
    log = npu.log
    assert log.count(("set_device", "npu:0")) == 1  # the worker thread (it prepares and runs)
    copy_stream, compute_stream = [name for what, name in log if what == "new"][:2]
    first_copy = log.index(("copy", copy_stream))  # the host-to-device copy is queued on the copy stream
    recorded = log.index(("record", copy_stream), first_copy)
    waited = log.index(("wait", f"{compute_stream}<-{copy_stream}"), recorded)
    assert log.index(("used_on", compute_stream)) > waited  # compute starts after the copy's event


if __name__ == "__main__":
    stand_in = install()
    if sys.argv[1] == "resolve":
        check_resolve(stand_in)
    else:
        asyncio.run(check_decode(stand_in))
    print("npu path ok")
