"""The model's parameter names and maths, and the strict loader."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from app.families.moss.fixtures.lm import TINY_MOSS_TTS_CONFIG, random_moss_lm, write_moss_tts
from app.families.moss.lm.config import official_config
from app.families.moss.lm.loader import MossCheckpointError, load_moss_lm
from app.families.moss.lm.model import official_layout
from app.observability.startup_errors import ModelSourceError

LAYER_MEMBERS = {
    "self_attn.q_proj": (2048, 2048),
    "self_attn.k_proj": (1024, 2048),
    "self_attn.v_proj": (1024, 2048),
    "self_attn.o_proj": (2048, 2048),
    "self_attn.q_norm": (128,),
    "self_attn.k_norm": (128,),
    "mlp.gate_proj": (6144, 2048),
    "mlp.up_proj": (6144, 2048),
    "mlp.down_proj": (2048, 6144),
    "input_layernorm": (2048,),
    "post_attention_layernorm": (2048,),
}


def test_the_real_size_layout_has_the_403_official_keys() -> None:
    expected = {"embed_tokens.0.weight": (151936, 2048), "language_model.embed_tokens.weight": (151936, 2048)}
    expected |= {f"embed_tokens.{i}.weight": (1027, 2048) for i in range(1, 17)}
    for prefix, layers in (("language_model", 28), ("local_transformer.model", 4)):
        for i in range(layers):
            expected |= {f"{prefix}.layers.{i}.{m}.weight": s for m, s in LAYER_MEMBERS.items()}
        expected[f"{prefix}.norm.weight"] = (2048,)
    expected |= {f"local_transformer.model.embed_tokens.{i}.weight": (1027, 2048) for i in range(15)}
    expected |= {f"local_transformer.local_lm_heads.{i}.weight": (1027, 2048) for i in range(16)}
    layout = official_layout(official_config())
    assert len(layout) == 403
    assert {k: tuple(v) for k, v in layout.items()} == expected
    assert sum(v.numel() for v in layout.values()) == 2_331_940_864


@pytest.fixture(scope="module")
def loaded(moss_tts_dir: Path):  # type: ignore[no-untyped-def]
    return load_moss_lm(str(moss_tts_dir))


def test_load_fills_every_weight_from_the_file(loaded) -> None:  # type: ignore[no-untyped-def]
    assert (
        loaded.dtype == torch.float32 and loaded.device == torch.device("cpu") and loaded.attention == "sdpa"
    )
    assert loaded.max_positions == 4096
    assert not loaded.model.training
    reference = random_moss_lm(TINY_MOSS_TTS_CONFIG, seed=0, stop_schedule=True).state_dict()
    state = loaded.model.state_dict()
    assert state.keys() == reference.keys()
    for key, tensor in reference.items():
        assert torch.equal(state[key], tensor), key
    assert not state["embed_tokens.3.weight"][1024].any()  # audio pad rows are zero
    assert loaded.model.language_model.embed_tokens is None  # the unused text table is never allocated


def test_ids_are_looked_up_by_string(loaded) -> None:  # type: ignore[no-untyped-def]
    tok = loaded.tokenizer
    assert loaded.ids.audio_pad == tok.convert_tokens_to_ids("<|audio_pad|>")
    assert loaded.ids.text_pad == tok.convert_tokens_to_ids("<|text_pad|>")
    assert loaded.ids.im_start == tok.convert_tokens_to_ids("<|im_start|>")
    assert loaded.ids.im_end == tok.convert_tokens_to_ids("<|im_end|>")
    assert loaded.ids.pad == tok.pad_token_id
    assert len({loaded.ids.audio_pad, loaded.ids.text_pad, loaded.ids.im_start, loaded.ids.im_end}) == 4


def test_rows_embed_as_the_sum_of_17_lookups(loaded) -> None:  # type: ignore[no-untyped-def]
    model = loaded.model
    rows = torch.tensor([[[5, *range(16)], [7, *([1024] * 15), 1025]]])
    manual = sum(model.embed_tokens[c].weight[rows[0, :, c]] for c in range(17))
    torch.testing.assert_close(model.embed(rows)[0], manual)


def test_local_steps_equal_a_transformers_qwen3_over_the_sequence(loaded) -> None:  # type: ignore[no-untyped-def]
    """Our cached 16-slot sub-steps compute what transformers' Qwen3 layers compute over the whole
    sequence (same RMSNorm, q/k norm, RoPE θ, GQA, SwiGLU): the local transformer is Qwen3 maths."""
    from transformers import Qwen3Config, Qwen3Model

    local = loaded.model.local_transformer
    c = local.config
    qwen = Qwen3Config(
        vocab_size=8,
        hidden_size=c.hidden_size,
        intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads,
        head_dim=c.head_dim,
        rms_norm_eps=c.rms_norm_eps,
        rope_theta=c.rope_theta,
        max_position_embeddings=32,
    )
    qwen._attn_implementation = "eager"
    reference = Qwen3Model(qwen).eval()
    own = {k: v for k, v in local.model.state_dict().items() if not k.startswith("embed_tokens")}
    missing, unexpected = reference.load_state_dict(own, strict=False)
    assert missing == ["embed_tokens.weight"] and unexpected == []
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(2, c.hidden_size, generator=gen)
    codes = torch.randint(0, 1024, (2, 15), generator=gen)
    inputs = [hidden] + [local.embed(i, codes[:, i - 1]) for i in range(1, 16)]
    with torch.no_grad():
        expected = reference(inputs_embeds=torch.stack(inputs, dim=1)).last_hidden_state
        cache = local.new_cache(4)
        for i in range(16):
            logits = local.step(i, inputs[i], cache)
            torch.testing.assert_close(logits, local.local_lm_heads[i](expected[:, i]), atol=1e-5, rtol=1e-4)


def test_eager_and_sdpa_agree_in_float32(moss_tts_dir: Path, loaded) -> None:  # type: ignore[no-untyped-def]
    eager = load_moss_lm(str(moss_tts_dir), attention="eager")
    assert eager.attention == "eager"
    rows = torch.randint(0, 1024, (2, 9, 17), generator=torch.Generator().manual_seed(1))
    rows[..., 0] %= 260
    with torch.no_grad():
        a, _ = loaded.model.backbone(rows, None)
        b, _ = eager.model.backbone(rows, None)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        ca, cb = loaded.model.local_transformer.new_cache(2), eager.model.local_transformer.new_cache(2)
        for i in range(3):
            torch.testing.assert_close(
                loaded.model.local_transformer.step(i, a, ca), eager.model.local_transformer.step(i, a, cb)
            )


def test_bfloat16_and_fp32_attention_options(moss_tts_dir: Path) -> None:
    bf16 = load_moss_lm(str(moss_tts_dir), dtype="bfloat16", attention="sdpa_fp32")
    assert bf16.dtype == torch.bfloat16 and bf16.attention == "sdpa_fp32"
    assert all(p.dtype == torch.bfloat16 for p in bf16.model.parameters())
    rows = torch.zeros(1, 3, 17, dtype=torch.long)
    with torch.no_grad():
        hidden, _ = bf16.model.backbone(rows, None)
        logits = bf16.model.local_transformer.step(0, hidden, bf16.model.local_transformer.new_cache(1))
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits).all()


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _rewrite(directory: Path, change) -> None:  # type: ignore[no-untyped-def]
    from safetensors.torch import load_file, save_file

    state = load_file(str(directory / "model.safetensors"))
    change(state)
    save_file(state, str(directory / "model.safetensors"))


def test_the_unused_text_table_may_be_absent(moss_tts_dir: Path, tmp_path: Path) -> None:
    directory = _copy(moss_tts_dir, tmp_path / "m")
    _rewrite(directory, lambda s: s.pop("language_model.embed_tokens.weight"))
    load_moss_lm(str(directory))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.pop("local_transformer.local_lm_heads.3.weight"), "1 missing keys"),
        (lambda s: s.update({"extra.weight": torch.zeros(2)}), "1 unexpected keys"),
        (lambda s: s.update({"embed_tokens.2.weight": torch.zeros(1027, 16)}), "mis-shaped"),
        (lambda s: s.update({"language_model.embed_tokens.weight": torch.zeros(3, 3)}), "mis-shaped"),
    ],
)
def test_a_checkpoint_that_does_not_fit_is_refused(
    moss_tts_dir: Path, tmp_path: Path, change, message: str
) -> None:  # type: ignore[no-untyped-def]
    directory = _copy(moss_tts_dir, tmp_path / "m")
    _rewrite(directory, change)
    with pytest.raises(MossCheckpointError, match=message):
        load_moss_lm(str(directory))


def test_bad_sources_are_one_line_errors(moss_tts_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelSourceError, match="neither a directory"):
        load_moss_lm(str(tmp_path / "nope"))
    directory = _copy(moss_tts_dir, tmp_path / "m")
    raw = json.loads((directory / "config.json").read_text())
    del raw["language_config"]
    (directory / "config.json").write_text(json.dumps(raw))
    with pytest.raises(MossCheckpointError, match="language_config"):
        load_moss_lm(str(directory))
    (directory / "model.safetensors").unlink()
    with pytest.raises(ModelSourceError, match="safetensors"):
        load_moss_lm(str(directory))


def test_a_sharded_checkpoint_loads(tmp_path: Path) -> None:
    directory = write_moss_tts(tmp_path / "sharded", shard_bytes=200_000)
    assert (directory / "model.safetensors.index.json").is_file()
    loaded = load_moss_lm(str(directory))
    reference = random_moss_lm(TINY_MOSS_TTS_CONFIG, seed=0, stop_schedule=True).state_dict()
    assert all(torch.equal(loaded.model.state_dict()[k], v) for k, v in reference.items())


def test_a_hub_id_downloads_through_app_hub(moss_tts_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    calls: list[dict[str, object]] = []

    def fake_download(**kwargs: object) -> str:
        calls.append(kwargs)
        return str(moss_tts_dir)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    loaded = load_moss_lm("OpenMOSS-Team/MOSS-TTS-Realtime", revision="v1")
    assert loaded.ids.text_pad == loaded.tokenizer.convert_tokens_to_ids("<|text_pad|>")
    assert calls[0]["repo_id"] == "OpenMOSS-Team/MOSS-TTS-Realtime" and calls[0]["revision"] == "v1"
    patterns = calls[0]["allow_patterns"]
    assert isinstance(patterns, list) and "*.safetensors" in patterns and "*.json" in patterns


def test_a_bfloat16_checkpoint_loads_into_float32(tmp_path: Path) -> None:
    directory = write_moss_tts(tmp_path / "bf16", dtype=torch.bfloat16)
    assert json.loads((directory / "config.json").read_text())["dtype"] == "bfloat16"
    loaded = load_moss_lm(str(directory))
    assert loaded.dtype == torch.float32
    reference = random_moss_lm(TINY_MOSS_TTS_CONFIG, seed=0, stop_schedule=True).state_dict()
    for key, tensor in loaded.model.state_dict().items():
        assert torch.equal(tensor, reference[key].to(torch.bfloat16).float()), key
