"""Checkpoints the precision tool's tests run on, beyond the suite-wide tiny LM and NeuCodec."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.tools.fixtures.moss_codec import write_moss_codec


@pytest.fixture(scope="session")
def tiny_moss_codec_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random MOSS codec in the official layout (seed 0: the weights ``random:tiny`` builds)."""
    return write_moss_codec(tmp_path_factory.mktemp("moss_codec") / "tiny")
