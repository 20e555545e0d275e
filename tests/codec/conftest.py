"""Shared codec fixtures: one tiny random checkpoint per session, written by our fixtures tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.codec.neucodec.decoder import NeuCodecDecoder
from app.codec.neucodec.loading import load_decoder
from app.tools.fixtures.codec import write_codec_checkpoint


@pytest.fixture(scope="session")
def tiny_codec_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Directory with a tiny ``pytorch_model.bin`` + ``neucodec_config.json`` (seed 0)."""
    return write_codec_checkpoint(tmp_path_factory.mktemp("codec") / "tiny")


@pytest.fixture(scope="session")
def tiny_decoder(tiny_codec_dir: Path) -> NeuCodecDecoder:
    """The tiny decoder loaded on cpu (shared: tests must not modify it)."""
    return load_decoder(str(tiny_codec_dir))
