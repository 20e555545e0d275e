"""Codec fixtures: the tiny decoder loaded once (its checkpoint comes from tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.codec.loading import load_decoder


@pytest.fixture(scope="session")
def tiny_decoder(tiny_codec_dir: Path) -> NeuCodecDecoder:
    """The tiny decoder loaded on cpu (shared: tests must not modify it)."""
    return load_decoder(str(tiny_codec_dir))
