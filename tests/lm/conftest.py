"""Shared fixtures for the LM tests: one tiny random TTS LM checkpoint per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.tools.fixtures.lm import write_tiny_lm


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen3 TTS LM (random weights, full speech vocabulary) written once per session."""
    return write_tiny_lm(tmp_path_factory.mktemp("tiny_lm"), seed=0)
