"""Loading: official layout (sharded safetensors, single file, pickle), strict key checks with the list,
older key spellings, decode-only without reading the encoder, Hugging Face ids without a network."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from app.families.moss.codec.loading import PICKLE_FILE, CheckpointError, load_codec, read_state
from app.families.moss.codec.model import MossAudioCodec
from app.families.moss.fixtures.codec import random_codec


def _state(directory: Path) -> dict[str, torch.Tensor]:
    return read_state(directory, lambda key: True)


def _write_single(directory: Path, state: dict[str, torch.Tensor], source: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "config.json", directory / "config.json")
    save_file({k: v.contiguous() for k, v in state.items()}, str(directory / "model.safetensors"))
    return directory


def test_loaded_weights_equal_the_fixture(tiny_moss: MossAudioCodec) -> None:
    expected = random_codec().state_dict()
    loaded = tiny_moss.state_dict()
    assert loaded.keys() == expected.keys()
    for key, value in expected.items():
        assert torch.equal(loaded[key], value), key
    assert all(p.device.type == "cpu" for p in tiny_moss.parameters())


def test_shards_are_listed_in_the_index(tiny_moss_dir: Path) -> None:
    index = json.loads((tiny_moss_dir / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) == 2
    assert set(index["weight_map"]) == set(random_codec().state_dict())


def test_decode_only_never_reads_the_encoder(tiny_moss_dir: Path, tmp_path: Path) -> None:
    state = {k: v for k, v in _state(tiny_moss_dir).items() if not k.startswith("encoder.")}
    directory = _write_single(tmp_path / "no_encoder", state, tiny_moss_dir)
    decoder = load_codec(str(directory), with_encoder=False)
    assert decoder.encoder is None
    with pytest.raises(ValueError, match="without its encoder"):
        decoder.encode([torch.zeros(1920)])
    with pytest.raises(CheckpointError, match=r"missing keys: encoder\.1\."):
        load_codec(str(directory))


def test_missing_unexpected_and_misshaped_keys_are_listed(tiny_moss_dir: Path, tmp_path: Path) -> None:
    state = _state(tiny_moss_dir)
    state.pop("decoder.0.transformer.layers.1.linear1.weight")
    state["decoder.0.transformer.layers.1.extra.weight"] = torch.zeros(2)
    state["quantizer.quantizers.3.codebook.weight"] = torch.zeros(1024, 4)
    directory = _write_single(tmp_path / "broken", state, tiny_moss_dir)
    with pytest.raises(CheckpointError) as info:
        load_codec(str(directory))
    message = str(info.value)
    assert "missing keys: decoder.0.transformer.layers.1.linear1.weight" in message
    assert "unexpected keys: decoder.0.transformer.layers.1.extra.weight" in message
    assert "quantizer.quantizers.3.codebook.weight (1024, 4) != (1024, 8)" in message


def test_older_key_spellings_load(tiny_moss_dir: Path, tmp_path: Path, tiny_moss: MossAudioCodec) -> None:
    renamed = {}
    for key, value in _state(tiny_moss_dir).items():
        key = key.replace(".parametrizations.weight.original0", ".weight_g")
        key = key.replace(".parametrizations.weight.original1", ".weight_v")
        key = key.replace(".self_attn.in_projs.0.weight", ".self_attn.in_proj_weight")
        key = key.replace(".self_attn.out_projs.0.weight", ".self_attn.out_proj.weight")
        renamed[key] = value
    assert any(k.endswith(".weight_g") for k in renamed) and any(
        k.endswith("in_proj_weight") for k in renamed
    )
    codec = load_codec(str(_write_single(tmp_path / "old", renamed, tiny_moss_dir)))
    codes = torch.randint(0, 1024, (3, 16), generator=torch.Generator().manual_seed(0))
    assert torch.equal(codec.decode(codes), tiny_moss.decode(codes))


def test_pickle_checkpoint(tiny_moss_dir: Path, tmp_path: Path) -> None:
    directory = tmp_path / "pickle"
    directory.mkdir()
    shutil.copy(tiny_moss_dir / "config.json", directory / "config.json")
    torch.save(_state(tiny_moss_dir), directory / PICKLE_FILE)
    assert load_codec(str(directory), with_encoder=False).encoder is None


def test_bad_sources(tmp_path: Path, tiny_moss_dir: Path) -> None:
    with pytest.raises(CheckpointError, match="neither a directory"):
        load_codec(str(tmp_path / "nowhere"))
    with pytest.raises(CheckpointError, match="is a file"):
        load_codec(str(tiny_moss_dir / "config.json"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError, match=r"config\.json"):
        load_codec(str(empty))
    shutil.copy(tiny_moss_dir / "config.json", empty / "config.json")
    with pytest.raises(CheckpointError, match=r"no model\.safetensors"):
        load_codec(str(empty))


def test_hub_id_downloads_only_config_and_weights(
    tiny_moss_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub

    calls: list[dict[str, object]] = []

    def fake_download(**kwargs: object) -> str:
        calls.append(kwargs)
        return str(tiny_moss_dir)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    codec = load_codec("OpenMOSS-Team/MOSS-Audio-Tokenizer", with_encoder=False)
    assert codec.encoder is None
    assert calls[0]["repo_id"] == "OpenMOSS-Team/MOSS-Audio-Tokenizer"
    assert "config.json" in calls[0]["allow_patterns"]
    assert "*.safetensors" in calls[0]["allow_patterns"]
