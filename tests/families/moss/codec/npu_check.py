"""The MOSS codec service on a stand-in ``torch_npu`` (``tests/families/neucodec/codec/npu_stand_in.py``),
run as
``python -m tests.families.moss.codec.npu_check`` in a subprocess (the stand-in renames torch's private
backend
for good).

Checks: ``npu:0`` resolves, both batchers' threads make it current, streamed decodes and an encode give the
cpu results. Tensors stay on the host (a CPU-only torch cannot allocate on a fake device)."""

from __future__ import annotations

import asyncio

import numpy as np
import torch

from app.core.device import resolve_device
from app.families.moss.codec.service import MossCodecOptions, MossCodecService
from app.families.moss.fixtures.codec import random_codec
from tests.families.neucodec.codec.npu_stand_in import HostBackedNpu, install


async def check(npu: object) -> None:
    torch.set_num_threads(1)
    codec = random_codec()
    ops = HostBackedNpu(resolve_device("npu:0"), npu)
    assert ops.is_accelerator and ops.kind == "npu"
    service = MossCodecService(codec, ops, options=MossCodecOptions(window_s=0.05))
    service.start()
    rng = np.random.default_rng(0)
    codes = [rng.integers(0, 1024, size=(5, 16)) for _ in range(2)]
    audio = (rng.standard_normal(1920 * 4) * 0.3).astype(np.float32)
    try:
        streams = [service.open_stream() for _ in codes]
        first = await asyncio.gather(*(s.decode(c[:2]) for s, c in zip(streams, codes, strict=True)))
        rest = await asyncio.gather(*(s.decode(c[2:]) for s, c in zip(streams, codes, strict=True)))
        prompt = await service.encode(audio)
    finally:
        await service.close()
    for c, a, b in zip(codes, first, rest, strict=True):
        expected = codec.decode(torch.from_numpy(c)).numpy()
        assert np.abs(np.concatenate([a, b]) - expected).max() <= 1e-5
    assert np.array_equal(prompt, codec.encode([torch.from_numpy(audio)], 16)[0].numpy())
    assert npu.log.count(("set_device", "npu:0")) == 2  # 2 batchers, 1 worker thread each


if __name__ == "__main__":
    asyncio.run(check(install()))
    print("moss npu path ok")
