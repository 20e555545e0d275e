"""NeuCodecEncoder: official key layout, published math, shapes and code range, exact batching, loading."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import huggingface_hub
import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from torch import nn
from transformers import SeamlessM4TFeatureExtractor, Wav2Vec2BertConfig, Wav2Vec2BertModel

from app.families.neucodec.codec.acoustic import WNConv1d
from app.families.neucodec.codec.alias_free import DownSample, UpSample
from app.families.neucodec.codec.config import CONFIG_FILENAME, NeuCodecConfig
from app.families.neucodec.codec.encoder import PAD_CODE, NeuCodecEncoder, frames_for, padded_length
from app.families.neucodec.codec.encoder_config import (
    ENCODER_CONFIG_FILENAME,
    OFFICIAL_SEMANTIC,
    NeuCodecEncoderConfig,
    read_encoder_config,
    write_encoder_config,
)
from app.families.neucodec.codec.fsq import FSQLookup, FSQQuantizer
from app.families.neucodec.codec.loading import (
    CheckpointError,
    is_unused_encoder_key,
    load_decoder,
    load_encoder,
)
from app.families.neucodec.codec.semantic import FEATURE_EXTRACTOR_PARAMS, SemanticEncoder
from app.families.neucodec.fixtures.codec import (
    TINY_ENCODER_CONFIG,
    encoder_checkpoint_layout,
    write_codec_checkpoint,
)


@pytest.fixture(scope="module")
def tiny_encoder(tiny_codec_dir: Path) -> NeuCodecEncoder:
    """The tiny encoder loaded on cpu (shared: tests must not modify it)."""
    return load_encoder(str(tiny_codec_dir))


def noise(n: int, seed: int) -> np.ndarray:
    """``n`` samples of quiet white noise at 16 kHz."""
    return (np.random.default_rng(seed).standard_normal(n) * 0.1).astype(np.float32)


def encode_alone(encoder: NeuCodecEncoder, audio: np.ndarray) -> list[int]:
    return encoder.encode(torch.from_numpy(audio).view(1, 1, -1))[0].tolist()


# --- layout ---------------------------------------------------------------------------------------


def _snake(prefix: str, c: int) -> dict[str, tuple[int, ...]]:
    return {
        f"{prefix}.act.alpha": (c,),
        f"{prefix}.act.beta": (c,),
        f"{prefix}.upsample.filter": (1, 1, 12),
        f"{prefix}.downsample.lowpass.filter": (1, 1, 12),
    }


def _wn(prefix: str, out: int, inp: int, k: int) -> dict[str, tuple[int, ...]]:
    return {f"{prefix}.weight_g": (out, 1, 1), f"{prefix}.weight_v": (out, inp, k), f"{prefix}.bias": (out,)}


def _official_codec_enc() -> dict[str, tuple[int, ...]]:
    """``CodecEnc`` keys of neucodec's CodecEncoder(ngf=48, up_ratios=[2, 2, 4, 4, 5], hidden_dim=1024)."""
    keys = _wn("CodecEnc.conv_blocks.0", 48, 1, 7)
    dim = 48
    for block, stride in enumerate((2, 2, 4, 4, 5), start=1):
        half, dim = dim, dim * 2
        for unit in range(3):
            prefix = f"CodecEnc.conv_blocks.{block}.block.{unit}.block"
            keys |= _snake(f"{prefix}.0", half) | _wn(f"{prefix}.1", half, half, 7)
            keys |= _snake(f"{prefix}.2", half) | _wn(f"{prefix}.3", half, half, 1)
        keys |= _snake(f"CodecEnc.conv_blocks.{block}.block.3", half)
        keys |= _wn(f"CodecEnc.conv_blocks.{block}.block.4", dim, half, 2 * stride)
    keys |= _snake("CodecEnc.conv_final_block.0", 1536)
    return keys | _wn("CodecEnc.conv_final_block.1", 1024, 1536, 3)


def _official_checkpoint_encoder_keys() -> dict[str, tuple[int, ...]]:
    """Every encoder key of ``neuphonic/neucodec``'s checkpoint, from the published architecture."""
    with torch.device("meta"):
        w2v = Wav2Vec2BertModel(Wav2Vec2BertConfig())  # transformers' defaults are w2v-bert-2.0's
    keys = {f"semantic_model.{k}": tuple(v.shape) for k, v in w2v.state_dict().items()}
    keys |= {
        "SemanticEncoder_module.initial_conv.weight": (1024, 1024, 3),
        "SemanticEncoder_module.residual_blocks.1.weight": (1024, 1024, 3),
        "SemanticEncoder_module.residual_blocks.1.bias": (1024,),
        "SemanticEncoder_module.residual_blocks.3.weight": (1024, 1024, 3),
        "SemanticEncoder_module.residual_blocks.3.bias": (1024,),
        "SemanticEncoder_module.final_conv.weight": (1024, 1024, 3),
        "fc_prior.weight": (2048, 2048),
        "fc_prior.bias": (2048,),
        "generator.quantizer.project_in.weight": (8, 2048),
        "generator.quantizer.project_in.bias": (8,),
    }
    return keys | _official_codec_enc()


def test_official_encoder_has_the_official_keys_but_the_unused_ones() -> None:
    config = NeuCodecEncoderConfig.official()
    with torch.device("meta"):
        model = NeuCodecEncoder(NeuCodecConfig.official(), config)
    ours = {key: tuple(value.shape) for key, value in model.state_dict().items()}
    official = _official_checkpoint_encoder_keys()
    skipped = {key for key in official if is_unused_encoder_key(key, config)}
    later_layers = tuple(f"semantic_model.encoder.layers.{i}." for i in range(16, 24))
    assert skipped == {"semantic_model.masked_spec_embed"} | {
        k for k in official if k.startswith(later_layers)
    }
    assert ours == {key: shape for key, shape in official.items() if key not in skipped}
    assert sum(math.prod(s) for k, s in ours.items() if k.startswith("CodecEnc.")) == 38_463_344  # 154 MB
    assert {name for name, _ in model.named_buffers()} <= set(ours)  # loading fills every tensor
    assert encoder_checkpoint_layout(NeuCodecConfig.official(), config).keys() == official.keys()


def test_official_values_are_w2v_bert_2_and_transformers_defaults() -> None:
    defaults = Wav2Vec2BertConfig()
    assert {key: getattr(defaults, key) for key in OFFICIAL_SEMANTIC} == OFFICIAL_SEMANTIC
    built = NeuCodecEncoderConfig.official().semantic_config()
    assert (built.num_hidden_layers, built.mask_time_prob, built._attn_implementation) == (16, 0.0, "eager")
    ours, default = SeamlessM4TFeatureExtractor(**FEATURE_EXTRACTOR_PARAMS), SeamlessM4TFeatureExtractor()
    assert (ours.padding_value, default.padding_value) == (1.0, 0.0)  # the only difference; never used
    assert (ours.feature_size, ours.num_mel_bins, ours.stride, ours.sampling_rate) == (80, 80, 2, 16000)


def test_encoder_config_file_and_validation(tmp_path: Path) -> None:
    assert read_encoder_config(tmp_path) == NeuCodecEncoderConfig.official()
    assert write_encoder_config(tmp_path, NeuCodecEncoderConfig.official()) is None
    assert write_encoder_config(tmp_path, TINY_ENCODER_CONFIG) == tmp_path / ENCODER_CONFIG_FILENAME
    assert read_encoder_config(tmp_path) == TINY_ENCODER_CONFIG
    with pytest.raises(ValueError, match="multiply to 320"):
        NeuCodecEncoderConfig(acoustic_strides=(2, 2, 4, 4, 4))
    with pytest.raises(ValueError, match="semantic_hidden_state"):
        NeuCodecEncoderConfig(semantic_hidden_state=25)
    with pytest.raises(ValueError, match="unknown"):
        NeuCodecEncoderConfig.from_dict({"depth": 3})
    with pytest.raises(ValueError, match="vq_dim"):
        NeuCodecEncoder(NeuCodecConfig(vq_dim=512), TINY_ENCODER_CONFIG)


# --- published math -------------------------------------------------------------------------------


def test_fsq_quantizer_is_the_double_bounded_residual_fsq() -> None:
    torch.manual_seed(0)
    quantizer = FSQQuantizer(16, (4,) * 8)
    x = torch.randn(2, 50, 16) * 3
    codes = quantizer(x)
    # vector-quantize-pytorch 1.17.8: ResidualFSQ bounds, then its FSQ layer bounds and rounds.
    half_l, offset = 3 * 1.001 / 2, 0.5
    shift = math.atanh(offset / half_l)
    z = quantizer.project_in(x)
    for _ in range(2):
        z = torch.tanh(z + shift) * half_l - offset
    digits = z.round() + 2
    expected = (digits * torch.tensor([4**i for i in range(8)])).sum(-1).long()
    assert torch.equal(codes, expected)
    assert codes.dtype == torch.long and int(codes.min()) >= 0 and int(codes.max()) < 4**8
    lookup = FSQLookup(16, (4,) * 8)  # the decoder's index -> values agrees with the rounding
    assert torch.equal(lookup.codes_to_values(codes), (digits - 2) / 2)


def test_semantic_encoder_keeps_the_inplace_relu_quirk() -> None:
    torch.manual_seed(0)
    ours = SemanticEncoder(8, 12)
    x = torch.randn(2, 8, 30)
    # The published forward: x = initial(x); x = residual_blocks(x) + x (first op an in-place ReLU).
    blocks = nn.Sequential(nn.ReLU(inplace=True), *list(ours.residual_blocks)[1:])
    h = ours.initial_conv(x)
    published = ours.final_conv(blocks(h) + h)
    torch.testing.assert_close(ours(x), published, rtol=0, atol=0)


def test_weight_norm_conv_and_resampler_lengths() -> None:
    torch.manual_seed(0)
    conv = WNConv1d(3, 5, 4, stride=2, padding=1)
    weight = conv.weight_g * conv.weight_v / conv.weight_v.norm(dim=(1, 2), keepdim=True)
    x = torch.randn(1, 3, 40)
    torch.testing.assert_close(conv(x), nn.functional.conv1d(x, weight, conv.bias, 2, 1))
    assert conv(x).shape == (1, 5, 20)
    up, down = UpSample(), DownSample()
    assert torch.allclose(up.filter.sum(), torch.tensor(1.0)) and torch.equal(up.filter, up.filter.flip(-1))
    t = torch.arange(400) / 16000
    sine = torch.sin(2 * math.pi * 300 * t).view(1, 1, -1)
    assert up(sine).shape == (1, 1, 800)
    torch.testing.assert_close(down(up(sine))[..., 20:-20], sine[..., 20:-20], atol=2e-2, rtol=0)


# --- shapes, range, exact batching ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("samples", "padded", "codes"),
    [(320, 640, 1), (639, 640, 1), (640, 960, 2), (959, 960, 2), (16000, 16320, 50), (16001, 16320, 50)],
)
def test_official_padding_rule(samples: int, padded: int, codes: int) -> None:
    assert (padded_length(samples), frames_for(samples)) == (padded, codes)


@pytest.mark.parametrize("samples", [320, 639, 640, 4800, 4801])
def test_one_code_per_20_ms_in_range(tiny_encoder: NeuCodecEncoder, samples: int) -> None:
    codes = tiny_encoder.encode(torch.from_numpy(noise(samples, samples)).view(1, 1, -1))
    assert codes.shape == (1, samples // 320)
    assert codes.dtype == torch.long and codes.device.type == "cpu"
    assert int(codes.min()) >= 0 and int(codes.max()) < 65536


def test_codes_are_deterministic_and_vary(tiny_encoder: NeuCodecEncoder, tiny_codec_dir: Path) -> None:
    audio = noise(8000, 1)
    first = encode_alone(tiny_encoder, audio)
    assert encode_alone(tiny_encoder, audio) == first
    assert encode_alone(load_encoder(str(tiny_codec_dir)), audio) == first
    assert len(set(first)) >= 10  # the random fixture is not degenerate
    assert encode_alone(tiny_encoder, noise(8000, 2)) != first


def test_mixed_length_batch_equals_each_item_alone(tiny_encoder: NeuCodecEncoder) -> None:
    # 4000 and 4100 share a padded length (4160) and run as one group; the others run alone.
    lengths = [4000, 1333, 4100, 640, 2500, 4000]
    items = [noise(n, seed) for seed, n in enumerate(lengths)]
    batch = torch.from_numpy(noise(len(lengths) * max(lengths), 99)).view(len(lengths), 1, -1)
    for row, item in enumerate(items):  # past each item's length: junk, which must be ignored
        batch[row, 0, : len(item)] = torch.from_numpy(item)
    codes = tiny_encoder.encode(batch, lengths)
    assert codes.shape == (len(lengths), max(lengths) // 320)
    for row, (item, n) in enumerate(zip(items, lengths, strict=True)):
        assert codes[row, : n // 320].tolist() == encode_alone(tiny_encoder, item), row
        assert (codes[row, n // 320 :] == PAD_CODE).all()


def test_bad_input_is_rejected(tiny_encoder: NeuCodecEncoder) -> None:
    with pytest.raises(ValueError, match=r"\[B, 1, S\]"):
        tiny_encoder.encode(torch.zeros(1, 1000))
    with pytest.raises(ValueError, match="320"):
        tiny_encoder.encode(torch.zeros(1, 1, 319))
    with pytest.raises(ValueError, match="lengths"):
        tiny_encoder.encode(torch.zeros(2, 1, 1000), [1000])
    audio = torch.zeros(1, 1, 1000)
    audio[0, 0, 10] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        tiny_encoder.encode(audio)


# --- loading --------------------------------------------------------------------------------------


def _state(directory: Path) -> dict[str, torch.Tensor]:
    return torch.load(directory / "pytorch_model.bin", map_location="cpu", weights_only=True)


def _copy_configs(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for name in (CONFIG_FILENAME, ENCODER_CONFIG_FILENAME):
        shutil.copy(src / name, dst / name)
    return dst


def test_loader_reads_exactly_the_used_encoder_keys(
    tiny_codec_dir: Path, tiny_encoder: NeuCodecEncoder
) -> None:
    saved = _state(tiny_codec_dir)
    loaded = tiny_encoder.state_dict()
    assert not tiny_encoder.training
    for key, value in loaded.items():
        assert torch.equal(value, saved[key]), key
    skipped = {key for key in saved if key.startswith("semantic_model.") and key not in loaded}
    assert skipped == {"semantic_model.masked_spec_embed"} | {
        key for key in saved if key.startswith("semantic_model.encoder.layers.2.")
    }
    assert "fc_post_a.weight" not in loaded and "generator.backbone.embed.weight" in saved


def test_checkpoint_without_encoder_serves_decode_only(tiny_codec_dir: Path, tmp_path: Path) -> None:
    decode_only = write_codec_checkpoint(tmp_path / "decode_only", with_encoder=False)
    assert not (decode_only / ENCODER_CONFIG_FILENAME).exists()
    full, bare = _state(tiny_codec_dir), _state(decode_only)
    for key, value in load_decoder(str(decode_only)).state_dict().items():
        assert torch.equal(value, full[key]), key  # the decoder does not depend on with_encoder
    assert set(bare) < set(full)
    with pytest.raises(CheckpointError, match=r"has no encoder weights \(decode only\)"):
        load_encoder(str(decode_only))
    write_encoder_config(decode_only, NeuCodecEncoderConfig(semantic_dim=64, acoustic_dim=32))
    state = _state(decode_only) | {"CodecEnc.conv_blocks.0.bias": torch.zeros(4)}
    torch.save(state, decode_only / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=r"does not fit its codec config: .*64 \+ 32"):
        load_encoder(str(decode_only))


def test_missing_or_misshaped_encoder_key_is_a_clear_error(tiny_codec_dir: Path, tmp_path: Path) -> None:
    state = _state(tiny_codec_dir)
    del state["semantic_model.encoder.layers.1.conv_module.depthwise_conv.weight"]
    state["fc_prior.bias"] = torch.zeros(3)
    directory = _copy_configs(tiny_codec_dir, tmp_path / "broken")
    torch.save(state, directory / "pytorch_model.bin")
    with pytest.raises(CheckpointError) as error:
        load_encoder(str(directory))
    assert "missing encoder keys: semantic_model.encoder.layers.1.conv_module" in str(error.value)
    assert "fc_prior.bias (3,) != (128,)" in str(error.value)


def test_safetensors_encoder_checkpoint_loads(
    tiny_codec_dir: Path, tiny_encoder: NeuCodecEncoder, tmp_path: Path
) -> None:
    directory = _copy_configs(tiny_codec_dir, tmp_path / "st")
    save_file(_state(tiny_codec_dir), str(directory / "model.safetensors"))
    audio = noise(2000, 3)
    assert encode_alone(load_encoder(str(directory)), audio) == encode_alone(tiny_encoder, audio)


def test_hub_id_also_fetches_the_encoder_config(
    tiny_codec_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, object]] = []

    def fake_snapshot_download(**kwargs: object) -> str:
        calls.append(kwargs)
        return str(tiny_codec_dir)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    assert isinstance(load_encoder("neuphonic/neucodec"), NeuCodecEncoder)
    assert ENCODER_CONFIG_FILENAME in calls[0]["allow_patterns"]
