"""load_decoder: local directories (bin / safetensors), HF ids, key filtering and clear errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import huggingface_hub
import pytest
import torch
from safetensors.torch import save_file

from app.families.neucodec.codec.config import CONFIG_FILENAME, read_config
from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.codec.loading import CheckpointError, is_decoder_key, load_decoder

ENCODER_KEYS = {
    "semantic_model.encoder.layers.0.ffn1.intermediate_dense.weight": (16, 8),
    "CodecEnc.conv_blocks.0.weight": (4, 1, 7),
    "SemanticEncoder_module.initial_conv.weight": (8, 8, 3),
    "fc_post_s.weight": (8, 8),
    "SemanticDecoder.final_conv.bias": (8,),
}
CODES = torch.randint(0, 65536, (1, 23), generator=torch.Generator().manual_seed(5))


def _state(directory: Path) -> dict[str, torch.Tensor]:
    return torch.load(directory / "pytorch_model.bin", map_location="cpu", weights_only=True)


def _copy_with_state(src: Path, dst: Path, state: dict[str, torch.Tensor]) -> Path:
    dst.mkdir()
    shutil.copy(src / CONFIG_FILENAME, dst / CONFIG_FILENAME)
    torch.save(state, dst / "pytorch_model.bin")
    return dst


def test_loads_tiny_checkpoint_strictly_in_eval_mode(tiny_codec_dir: Path) -> None:
    model = load_decoder(str(tiny_codec_dir))
    assert not model.training
    assert model.config == read_config(tiny_codec_dir)
    saved = _state(tiny_codec_dir)
    for key, value in model.state_dict().items():
        assert torch.equal(value, saved[key]), key
    extra = {k for k in saved if k not in model.state_dict()}  # the encoder's keys (the fixture writes both)
    assert {"fc_prior.weight", "fc_prior.bias"} <= extra
    assert not any(is_decoder_key(k) for k in extra)


def test_encoder_keys_are_ignored(
    tiny_codec_dir: Path, tiny_decoder: NeuCodecDecoder, tmp_path: Path
) -> None:
    state = _state(tiny_codec_dir) | {key: torch.randn(shape) for key, shape in ENCODER_KEYS.items()}
    model = load_decoder(str(_copy_with_state(tiny_codec_dir, tmp_path / "with_encoder", state)))
    assert set(model.state_dict()) == set(tiny_decoder.state_dict())
    assert torch.equal(model.decode(CODES), tiny_decoder.decode(CODES))


def test_missing_decoder_key_is_a_clear_error(tiny_codec_dir: Path, tmp_path: Path) -> None:
    state = _state(tiny_codec_dir)
    del state["generator.backbone.transformers.1.mlp.fc2.weight"]
    directory = _copy_with_state(tiny_codec_dir, tmp_path / "missing", state)
    with pytest.raises(
        CheckpointError, match=r"missing decoder keys: generator\.backbone\.transformers\.1\.mlp"
    ):
        load_decoder(str(directory))


def test_unknown_key_under_a_decoder_prefix_is_an_error(tiny_codec_dir: Path, tmp_path: Path) -> None:
    state = _state(tiny_codec_dir) | {"generator.head.extra.weight": torch.zeros(2)}
    directory = _copy_with_state(tiny_codec_dir, tmp_path / "extra", state)
    with pytest.raises(CheckpointError, match=r"unexpected decoder keys: generator\.head\.extra\.weight"):
        load_decoder(str(directory))


def test_config_that_does_not_fit_the_weights_is_an_error(tiny_codec_dir: Path, tmp_path: Path) -> None:
    directory = tmp_path / "no_config"
    directory.mkdir()
    shutil.copy(tiny_codec_dir / "pytorch_model.bin", directory)  # no json: official sizes assumed
    with pytest.raises(
        CheckpointError, match=r"wrong shapes .*fc_post_a\.weight \(64, 128\) != \(1024, 2048\)"
    ):
        load_decoder(str(directory))


def test_safetensors_checkpoint_loads(
    tiny_codec_dir: Path, tiny_decoder: NeuCodecDecoder, tmp_path: Path
) -> None:
    directory = tmp_path / "st"
    directory.mkdir()
    shutil.copy(tiny_codec_dir / CONFIG_FILENAME, directory)
    state = _state(tiny_codec_dir) | {key: torch.randn(shape) for key, shape in ENCODER_KEYS.items()}
    save_file(state, str(directory / "model.safetensors"))
    model = load_decoder(str(directory))
    assert torch.equal(model.decode(CODES), tiny_decoder.decode(CODES))


def test_directory_without_weights_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"no model\.safetensors or pytorch_model\.bin"):
        load_decoder(str(tmp_path))


def test_hub_id_is_downloaded_with_only_the_files_we_read(
    tiny_codec_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, object]] = []

    def fake_snapshot_download(**kwargs: object) -> str:
        calls.append(kwargs)
        return str(tiny_codec_dir)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    model = load_decoder("neuphonic/neucodec")
    assert isinstance(model, NeuCodecDecoder)
    assert len(calls) == 1
    assert calls[0]["repo_id"] == "neuphonic/neucodec"
    assert sorted(calls[0]["allow_patterns"]) == sorted(
        ["model.safetensors", "pytorch_model.bin", CONFIG_FILENAME]
    )


@pytest.mark.parametrize("source", ["./no/such/dir", "/no/such/dir", "not a repo id"])
def test_missing_local_path_is_not_sent_to_the_hub(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(**kwargs: object) -> str:
        raise AssertionError("must not download")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fail)
    with pytest.raises(CheckpointError, match="neither a directory nor a Hugging Face repo id"):
        load_decoder(source)


def test_file_instead_of_directory_is_an_error(tiny_codec_dir: Path) -> None:
    with pytest.raises(CheckpointError, match="is a file"):
        load_decoder(str(tiny_codec_dir / "pytorch_model.bin"))
