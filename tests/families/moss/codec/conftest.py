"""MOSS codec fixtures: the tiny random checkpoint (official layout) written, and loaded, once."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.families.moss.codec.loading import load_codec
from app.families.moss.codec.model import MossAudioCodec


@pytest.fixture(scope="session")
def tiny_moss_dir(tiny_moss_codec_dir: Path) -> Path:
    """The suite's tiny random MOSS codec: ``config.json``, two safetensors shards and their index."""
    return tiny_moss_codec_dir


@pytest.fixture(scope="session")
def tiny_moss(tiny_moss_dir: Path) -> MossAudioCodec:
    """The tiny codec loaded on cpu with its encoder (shared: tests must not modify it)."""
    return load_codec(str(tiny_moss_dir))


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread: None) -> None:
    """Every test here runs torch on one thread (the suite's ``one_torch_thread``)."""
