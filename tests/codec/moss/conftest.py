"""MOSS codec fixtures: the tiny random checkpoint (official layout) written, and loaded, once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from app.codec.moss.loading import load_codec
from app.codec.moss.model import MossAudioCodec


@pytest.fixture(scope="session")
def tiny_moss_dir(tiny_moss_codec_dir: Path) -> Path:
    """The suite's tiny random MOSS codec: ``config.json``, two safetensors shards and their index."""
    return tiny_moss_codec_dir


@pytest.fixture(scope="session")
def tiny_moss(tiny_moss_dir: Path) -> MossAudioCodec:
    """The tiny codec loaded on cpu with its encoder (shared: tests must not modify it)."""
    return load_codec(str(tiny_moss_dir))


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """The tiny codec's ops are microseconds of work: with several OpenMP threads on a loaded shared CPU each
    one waits for the pool (20x slower here), so these tests run torch on one thread."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)
