"""The official config and checkpoint layout: stage contexts, key names, shapes and parameter counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from app.families.moss.codec.config import (
    MossCodecConfig,
    from_dict,
    official_dict,
    read_config,
    write_config,
)
from app.families.moss.codec.model import MossAudioCodec
from app.families.moss.fixtures.codec import checkpoint_layout


@pytest.fixture(scope="module")
def official_layout() -> dict[str, torch.Size]:
    return checkpoint_layout(MossCodecConfig.official())


def test_official_stage_contexts_and_rates() -> None:
    config = MossCodecConfig.official()
    assert (config.sampling_rate, config.downsample_rate, config.frame_rate) == (24000, 1920, 12.5)
    assert config.context_frames == 125
    with torch.device("meta"):
        model = MossAudioCodec(config)
    assert [t.stage.context for t in model.encoder.transformers()] == [1000, 500, 250, 125]
    assert [t.stage.context for t in model.decoder.transformers()] == [125, 250, 500, 1000]
    assert model.decoder.positions_per_frame() == [1, 2, 4, 8]


def test_official_parameter_counts() -> None:
    with torch.device("meta"):
        model = MossAudioCodec(MossCodecConfig.official())
    count = lambda module: sum(p.numel() for p in module.parameters())  # noqa: E731
    assert count(model) == 1_774_566_400
    assert count(model.encoder) == count(model.decoder) == 886_609_920
    assert count(model.quantizer) == 1_346_560


@pytest.mark.parametrize(
    ("key", "shape"),
    [
        ("encoder.1.input_proj.weight", (768, 240)),
        ("encoder.1.output_proj.weight", (384, 768)),
        ("encoder.3.output_proj.weight", (384, 768)),
        ("encoder.5.output_proj.weight", (640, 768)),
        ("encoder.7.output_proj.weight", (768, 1280)),
        ("encoder.7.transformer.layers.31.self_attn.in_projs.0.weight", (3840, 1280)),
        ("encoder.1.transformer.layers.11.self_attn.out_projs.0.weight", (768, 768)),
        ("decoder.0.input_proj.weight", (1280, 768)),
        ("decoder.0.transformer.layers.31.linear1.weight", (5120, 1280)),
        ("decoder.0.transformer.layers.0.linear2.weight", (1280, 5120)),
        ("decoder.2.input_proj.weight", (768, 640)),
        ("decoder.4.input_proj.weight", (768, 384)),
        ("decoder.6.input_proj.weight", (768, 384)),
        ("decoder.6.output_proj.weight", (240, 768)),
        ("decoder.6.transformer.layers.11.norm1.weight", (768,)),
        ("decoder.6.transformer.layers.11.norm2.bias", (768,)),
        ("decoder.6.transformer.layers.11.layer_scale_1.scale", (768,)),
        ("decoder.6.transformer.layers.11.layer_scale_2.scale", (768,)),
        ("quantizer.input_proj.parametrizations.weight.original0", (512, 1, 1)),
        ("quantizer.input_proj.parametrizations.weight.original1", (512, 768, 1)),
        ("quantizer.input_proj.bias", (512,)),
        ("quantizer.output_proj.parametrizations.weight.original1", (768, 512, 1)),
        ("quantizer.quantizers.0.in_proj.parametrizations.weight.original1", (8, 512, 1)),
        ("quantizer.quantizers.31.out_proj.parametrizations.weight.original1", (512, 8, 1)),
        ("quantizer.quantizers.31.out_proj.bias", (512,)),
        ("quantizer.quantizers.31.codebook.weight", (1024, 8)),
    ],
)
def test_official_key_shapes(
    official_layout: dict[str, torch.Size], key: str, shape: tuple[int, ...]
) -> None:
    assert tuple(official_layout[key]) == shape


def test_official_key_set(official_layout: dict[str, torch.Size]) -> None:
    # Identity projections have no keys; patches hold no weights; no other module kinds exist
    for absent in (
        "encoder.3.input_proj.weight",
        "encoder.7.input_proj.weight",
        "decoder.0.output_proj.weight",
    ):
        assert absent not in official_layout
    assert not any(
        key.startswith(("encoder.0.", "encoder.2.", "decoder.1.", "decoder.7.")) for key in official_layout
    )
    per_layer = 10  # in_projs, out_projs, norm1 w/b, norm2 w/b, linear1, linear2, two layer scales
    layers = 2 * (12 * 3 + 32)
    quantizer = 2 * 3 + 32 * (3 + 3 + 1)
    projections = 5 + 5  # encoder 1 in/out, 3 out, 5 out, 7 out; decoder 0 in, 2 in, 4 in, 6 in/out
    assert len(official_layout) == layers * per_layer + quantizer + projections == 1600


def test_config_json_round_trip(tmp_path: Path) -> None:
    data = official_dict()
    config = from_dict(data)
    write_config(tmp_path, config)
    stored = json.loads((tmp_path / "config.json").read_text())
    # the keys the upstream loader reads, and the extra ones it ignores, are all kept
    for key in (
        "encoder_kwargs",
        "decoder_kwargs",
        "quantizer_kwargs",
        "auto_map",
        "reversed_decoder_kwargs",
    ):
        assert key in stored
    assert stored["quantizer_kwargs"]["num_quantizers"] == 32
    assert read_config(tmp_path) == config


@pytest.mark.parametrize(
    ("where", "field", "value", "message"),
    [
        ("decoder_kwargs", "gating", "silu", "gating"),
        ("encoder_kwargs", "norm", "rms_norm", "norm"),
        ("encoder_kwargs", "positional_embedding", "sin", "positional_embedding"),
        ("decoder_kwargs", "causal", False, "causal"),
    ],
)
def test_unsupported_variants_fail_with_the_field(
    where: str, field: str, value: object, message: str
) -> None:
    data = official_dict()
    stage = next(s for s in data[where] if s["module_type"] == "Transformer")
    stage[field] = value
    with pytest.raises(ValueError, match=message):
        from_dict(data)


def test_unsupported_quantizer_and_patch_mismatch() -> None:
    data = official_dict()
    data["quantizer_kwargs"]["quantizer_type"] = "rvq"
    with pytest.raises(ValueError, match="rvq"):
        from_dict(data)
    data = official_dict()
    data["decoder_kwargs"][-1]["patch_size"] = 120
    with pytest.raises(ValueError, match="downsample_rate"):
        from_dict(data)
