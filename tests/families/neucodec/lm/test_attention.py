"""Float32 attention (sdpa_fp32) for the in-process LM: the maths, the model wiring, the setting."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from app.families.neucodec.family import build_source
from app.families.neucodec.lm.transformers_source import TransformersTokenSource
from app.families.neucodec.lm.types import GenerationParams
from app.lm.attention import FP32_SDPA, _sdpa_fp32, attention_implementation
from tests.conftest import make_settings

PARAMS = GenerationParams(
    prompt="<|im_start|>jenny: Hello there!<|speech_start|>",
    model="tiny",
    max_tokens=10,
    temperature=0.0,
    repetition_penalty=1.0,
)


class _Module(torch.nn.Module):
    """The attributes transformers' SDPA attention reads from the attention module."""

    num_key_value_groups = 1
    is_causal = True


def test_fp32_attention_is_float32_sdpa_of_the_bf16_inputs_rounded_back() -> None:
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 12, 16, generator=generator).bfloat16() for _ in range(3))
    out, _ = _sdpa_fp32(_Module(), q, k, v, None, scaling=0.25)
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True, scale=0.25)
    assert out.dtype == torch.bfloat16
    assert out.shape == (1, 12, 4, 16)  # transformers returns [B, T, H, D]
    assert torch.equal(out, expected.transpose(1, 2).bfloat16())
    in_bf16 = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.25).transpose(1, 2)
    assert not torch.equal(out, in_bf16)  # it is not the bf16 kernel under another name


def test_attention_names() -> None:
    assert attention_implementation("sdpa") == "sdpa"
    assert attention_implementation("eager") == "eager"
    assert attention_implementation(FP32_SDPA) == FP32_SDPA
    with pytest.raises(ValueError, match="unknown attention"):
        attention_implementation("flash")


async def _greedy(source: TransformersTokenSource) -> list[int]:
    await source.start()
    try:
        codes: list[int] = []
        async for delta in source.generate(PARAMS):
            codes += delta
        return codes
    finally:
        await source.close()


async def test_in_float32_the_fp32_attention_source_generates_what_the_plain_one_does(
    tiny_lm_dir: Path,
) -> None:
    plain = TransformersTokenSource(str(tiny_lm_dir), "cpu", dtype="float32")
    fp32 = TransformersTokenSource(str(tiny_lm_dir), "cpu", dtype="float32", attention_fp32=True)
    assert await _greedy(fp32) == await _greedy(plain)


async def test_bf16_source_with_fp32_attention_loads_the_registered_kernel(tiny_lm_dir: Path) -> None:
    source = TransformersTokenSource(str(tiny_lm_dir), "cpu", dtype="bfloat16", attention_fp32=True)
    await source.start()
    try:
        assert source._lm is not None
        assert source._lm.model.config._attn_implementation == FP32_SDPA
        assert source._lm.model.dtype == torch.bfloat16
        stream = source.generate(dataclasses.replace(PARAMS, max_tokens=4))
        codes = [code async for delta in stream for code in delta]
        assert stream.finish_reason in {"length", "stop"}
        assert len(codes) == 4 or stream.finish_reason == "stop"
    finally:
        await source.close()


def test_setting_reaches_the_in_process_source(tiny_lm_dir: Path) -> None:
    on = build_source(
        make_settings(LM_BACKEND="transformers", TTS_MODEL=str(tiny_lm_dir), LM_ATTENTION_FP32=True)
    )
    off = build_source(make_settings(LM_BACKEND="transformers", TTS_MODEL=str(tiny_lm_dir)))
    assert isinstance(on, TransformersTokenSource) and isinstance(off, TransformersTokenSource)
    assert (on._attention, off._attention) == (FP32_SDPA, "sdpa")
