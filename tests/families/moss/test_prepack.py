"""MOSS_PREPACK: on a CPU the MOSS LM and the codec's decoder run on weights laid out once for oneDNN and
make the same frames and audio; the codec's encoder stays plain; the setting turns it off."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from app.codec.prepack import PackedLinear, prepack_for_cpu
from app.families.moss.codec.loading import load_codec
from app.families.moss.codec.model import MossAudioCodec
from app.families.moss.lm.engine import MossFrameEngine
from app.families.moss.lm.loader import LoadedMoss, load_moss_lm
from app.families.moss.lm.prompt import MossPrompter
from app.families.moss.lm.stage import load_lm
from app.families.moss.lm.types import FrameJob, FrameSampling
from tests.families.moss.conftest import build, moss_settings
from tests.packing import needs_bf16_packing


def linears(module: nn.Module) -> list[nn.Module]:
    return [m for m in module.modules() if isinstance(m, nn.Linear | PackedLinear)]


@pytest.mark.parametrize("prepack", [True, False])
async def test_the_family_prepacks_the_codec_decoder_and_not_its_encoder(
    tiny_moss_codec_dir: Path, prepack: bool
) -> None:
    parts = build(moss_settings(tiny_moss_codec_dir, MOSS_PREPACK=prepack))
    await parts.family.start()
    try:
        service = parts.family.codec
        assert service is not None
        codec = service.codec
        details = parts.family.details()
    finally:
        await parts.family.close()
    assert details["codec"]["decoder"]["prepacked"] is prepack
    assert "prepacked" not in details["codec"]["encoder"]
    assert all(isinstance(m, PackedLinear) == prepack for m in linears(codec.decoder))
    assert codec.encoder is not None and all(type(m) is nn.Linear for m in linears(codec.encoder))


def frames(loaded: LoadedMoss, job: FrameJob) -> np.ndarray:
    async def run() -> np.ndarray:
        engine = MossFrameEngine(loaded)
        engine.start()
        try:
            return np.concatenate([chunk async for chunk in engine.stream(job)])
        finally:
            await engine.close()

    return asyncio.run(run())


@pytest.mark.parametrize("dtype", ["float32", pytest.param("bfloat16", marks=needs_bf16_packing)])
def test_a_prepacked_lm_makes_the_same_frames(plain_moss_tts_dir: Path, dtype: str) -> None:
    plain = load_moss_lm(str(plain_moss_tts_dir), dtype=dtype)
    packed = load_moss_lm(str(plain_moss_tts_dir), dtype=dtype)
    report = prepack_for_cpu(packed.model)
    assert report.packed == len(linears(plain.model)) and not report.plain  # backbone, local, heads
    prompter = MossPrompter(plain.tokenizer, plain.ids)
    for sampling in (FrameSampling(temperature=0.0), FrameSampling(seed=3)):
        job = prompter.job(
            "The first request speaks a sentence.", reference=None, max_frames=24, sampling=sampling
        )
        assert np.array_equal(frames(packed, job), frames(plain, job))


@pytest.mark.parametrize("prepack", [True, False])
def test_load_lm_follows_the_setting(moss_tts_dir: Path, tiny_moss_codec_dir: Path, prepack: bool) -> None:
    settings = moss_settings(tiny_moss_codec_dir, MOSS_TTS_MODEL=str(moss_tts_dir), MOSS_PREPACK=prepack)
    lm = load_lm(settings, "cpu")
    assert lm.prepacked is prepack
    model = lm.engine.loaded.model
    assert all(isinstance(m, PackedLinear) == prepack for m in linears(model))
    assert model.local_transformer.model.norm.weight.device.type == "cpu"  # what the engine reads


def decode(codec: MossAudioCodec, chunks: list[torch.Tensor]) -> torch.Tensor:
    """Two streams, two steps of 3 frames each: the audio of both, in order."""
    states = [codec.new_state(), codec.new_state()]
    return torch.cat([*codec.decode_step(chunks[:2], states), *codec.decode_step(chunks[2:], states)])


def relative_squared_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).pow(2).sum() / want.pow(2).sum())


def test_a_prepacked_codec_decoder_streams_the_same_audio(tiny_moss_codec_dir: Path) -> None:
    generator = torch.Generator().manual_seed(0)
    chunks = [torch.randint(0, 1024, (3, 16), generator=generator) for _ in range(4)]
    reference = load_codec(str(tiny_moss_codec_dir), with_encoder=False)
    want = decode(reference, chunks)
    for dtype in (torch.float32, torch.bfloat16):
        plain = load_codec(str(tiny_moss_codec_dir), with_encoder=False, dtype=dtype)
        packed = load_codec(str(tiny_moss_codec_dir), with_encoder=False, dtype=dtype)
        prepack_for_cpu(packed.decoder, convolutions=True)
        assert packed.decoder_dtype == dtype and packed.new_state().caches[0].kv.dtype == dtype
        got, plain_audio = decode(packed, chunks), decode(plain, chunks)
        if dtype == torch.float32:
            torch.testing.assert_close(got, plain_audio, rtol=1e-5, atol=1e-5)
        else:  # bf16: as close to float32 as the plain bf16 decoder (measured: the same bits)
            snr_plain = -10 * math.log10(relative_squared_error(plain_audio, want))
            assert -10 * math.log10(relative_squared_error(got, want)) >= snr_plain - 0.5
