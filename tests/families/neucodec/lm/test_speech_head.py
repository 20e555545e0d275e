"""SpeechHead gives the model's own logits at the allowed ids; the CPU float32 weight layout changes no
output."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from app.families.neucodec.lm.loading import load_lm
from app.families.neucodec.lm.speech_head import SpeechHead, layout_for_cpu


@pytest.mark.usefixtures("one_torch_thread")
def test_the_loaded_lm_gives_the_full_models_logits_at_the_allowed_ids(tiny_lm_dir: Path) -> None:
    lm = load_lm(str(tiny_lm_dir), torch.device("cpu"), torch.float32)
    ids = lm.tokenizer("<|im_start|>jenny: Hello there!<|speech_start|>", return_tensors="pt").input_ids
    with torch.inference_mode():
        full = lm.model(input_ids=ids, logits_to_keep=1).logits[0, -1]
        logits, cache = lm.logits(input_ids=ids)
        assert logits.shape == (1, len(lm.allowed_ids)) and logits.dtype == torch.float32
        assert torch.allclose(logits[0], full[lm.allowed_ids], atol=1e-5)
        # and the next step from the cache: the same as the full model from the whole sequence
        after, _ = lm.logits(input_ids=lm.allowed_ids[7].view(1, 1), past_key_values=cache)
        whole = torch.cat([ids, lm.allowed_ids[7].view(1, 1)], dim=1)
        full_after = lm.model(input_ids=whole, logits_to_keep=1).logits[0, -1]
    assert torch.allclose(after[0], full_after[lm.allowed_ids], atol=1e-5)


def test_float32_weights_on_the_cpu_are_stored_column_major_and_bf16_ones_untouched(
    tiny_lm_dir: Path,
) -> None:
    lm = load_lm(str(tiny_lm_dir), torch.device("cpu"), torch.float32)
    linears = [m for m in lm.decoder.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(m.weight.t().is_contiguous() for m in linears)
    assert lm.head.weight.t().is_contiguous()
    half = load_lm(str(tiny_lm_dir), torch.device("cpu"), torch.bfloat16)
    assert all(m.weight.is_contiguous() for m in half.decoder.modules() if isinstance(m, torch.nn.Linear))


def test_layout_for_cpu_changes_no_output() -> None:
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 24)
    model = SimpleNamespace(get_decoder=lambda: torch.nn.Sequential(layer))
    x = torch.randn(3, 16)
    before = layer(x)
    layout_for_cpu(model)
    assert layer.weight.shape == (24, 16) and not layer.weight.is_contiguous()
    assert torch.allclose(layer(x), before, atol=1e-6)


def test_the_head_keeps_the_output_layers_bias_and_soft_capping() -> None:
    torch.manual_seed(0)
    out = torch.nn.Linear(8, 10)
    model = SimpleNamespace(
        get_output_embeddings=lambda: out, config=SimpleNamespace(final_logit_softcapping=2.0)
    )
    allowed = torch.tensor([9, 2, 5])
    hidden = torch.randn(4, 8)
    expected = (torch.tanh(out(hidden) / 2.0) * 2.0)[:, allowed]
    assert torch.allclose(SpeechHead(model, allowed)(hidden), expected, atol=1e-6)
