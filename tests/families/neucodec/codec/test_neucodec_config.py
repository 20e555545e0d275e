"""NeuCodecConfig: official sizes, derived sizes, the optional neucodec_config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.families.neucodec.codec.config import CONFIG_FILENAME, NeuCodecConfig, read_config, write_config
from app.families.neucodec.fixtures.codec import TINY_CODEC_CONFIG


def test_official_sizes() -> None:
    config = NeuCodecConfig.official()
    assert (config.hidden_dim, config.depth, config.heads, config.vq_dim) == (1024, 12, 16, 2048)
    assert (config.n_fft, config.head_dim, config.codebook_size) == (1920, 64, 65536)
    assert config.sample_rate // config.hop_length == 50  # 50 codes per second


def test_official_config_writes_no_file_and_absent_file_means_official(tmp_path: Path) -> None:
    assert write_config(tmp_path, NeuCodecConfig.official()) is None
    assert not (tmp_path / CONFIG_FILENAME).exists()
    assert read_config(tmp_path) == NeuCodecConfig.official()


def test_non_official_config_round_trips(tmp_path: Path) -> None:
    path = write_config(tmp_path, TINY_CODEC_CONFIG)
    assert path == tmp_path / CONFIG_FILENAME
    assert json.loads(path.read_text())["levels"] == [4] * 8
    assert read_config(tmp_path) == TINY_CODEC_CONFIG


def test_unknown_field_is_an_error(tmp_path: Path) -> None:
    (tmp_path / CONFIG_FILENAME).write_text(json.dumps({"hidden_dim": 64, "width": 3}))
    with pytest.raises(ValueError, match="width"):
        read_config(tmp_path)


@pytest.mark.parametrize(
    "fields",
    [{"hidden_dim": 48}, {"hidden_dim": 64, "heads": 3}, {"levels": ()}, {"hop_length": 0}],
)
def test_invalid_sizes_are_rejected(fields: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        NeuCodecConfig(**fields)
