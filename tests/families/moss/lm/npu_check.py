"""The MOSS LM on a stand-in ``torch_npu`` (``tests/families/neucodec/codec/npu_stand_in.py``), run as
``python -m tests.families.moss.lm.npu_check`` in a subprocess (the stand-in renames torch's private backend
for
good).

Checks: ``npu:0`` resolves and picks bfloat16 and sdpa; the engine's thread makes the device current;
frames equal a cpu run in the same dtype and attention. The weights stay on the host (a CPU-only torch
cannot allocate on a fake device), so the loader's ``materialize`` is pointed at the host, as
``HostBackedNpu`` does for the codec."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import numpy as np
import torch

from app.families.moss.fixtures.lm import write_moss_tts
from app.families.moss.lm import loader
from app.families.moss.lm.engine import MossFrameEngine
from app.families.moss.lm.prompt import MossPrompter
from app.families.moss.lm.types import FrameSampling
from tests.families.neucodec.codec.npu_stand_in import install


async def frames(loaded: loader.LoadedMoss) -> list[np.ndarray]:
    prompter = MossPrompter(loaded.tokenizer, loaded.ids)
    ref = np.random.default_rng(0).integers(0, 1024, size=(5, 16))
    jobs = [
        prompter.job("On the npu.", reference=ref, max_frames=6, sampling=FrameSampling(seed=3)),
        prompter.job("Greedy too.", reference=None, max_frames=4, sampling=FrameSampling(temperature=0)),
    ]
    engine = MossFrameEngine(loaded)
    engine.start()
    try:

        async def one(job: object) -> np.ndarray:
            return np.concatenate([f async for f in engine.stream(job)])  # type: ignore[arg-type]

        return list(await asyncio.gather(*(one(job) for job in jobs)))
    finally:
        await engine.close()


async def check(npu: object, directory: Path) -> None:
    torch.set_num_threads(1)
    cpu = loader.load_moss_lm(str(directory), device="cpu", dtype="bfloat16", attention="sdpa")
    expected = await frames(cpu)
    loader.materialize = lambda model, device: model.to_empty(device="cpu")  # host-backed weights
    on_npu = loader.load_moss_lm(str(directory), device="npu:0", dtype="auto")
    assert on_npu.device == torch.device("npu:0")
    assert on_npu.dtype == torch.bfloat16 and on_npu.attention == "sdpa"  # the accelerator defaults
    assert MossFrameEngine(on_npu).details()["device"] == "npu:0"
    got = await frames(on_npu)
    for want, have in zip(expected, got, strict=True):
        assert np.array_equal(want, have)
    assert npu.log.count(("set_device", "npu:0")) == 1  # type: ignore[attr-defined]  # the engine's thread


if __name__ == "__main__":
    from transformers.models.qwen3 import modeling_qwen3  # noqa: F401  (imported before the stand-in:
    from transformers.utils import is_torch_npu_available  # its npu kernels need the real torch_npu)

    assert not is_torch_npu_available()  # cached: we run torch's own sdpa, as on an Ascend card
    stand_in = install()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(check(stand_in, write_moss_tts(Path(tmp) / "moss_tts")))
    print("moss lm npu path ok")
