"""Suite-wide setup (no settings leak in from the environment or a .env file) and shared checkpoints."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from app.config import Settings
from app.core.settings import ServerSettings, env_names
from app.families.moss.fixtures.lm import write_moss_tts
from app.families.neucodec.fixtures.codec import write_codec_checkpoint
from app.families.neucodec.fixtures.lm import write_tiny_lm


def pytest_configure() -> None:
    for name in env_names(Settings):
        os.environ.pop(name, None)
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing in the suite may reach a hub
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Torch on one thread for the test: tiny models' ops are microseconds of work, and with several
    OpenMP threads on a loaded shared CPU each op waits for the pool (20x slower here)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


def make_settings(of: type[ServerSettings] = Settings, **overrides: object) -> Any:
    """Settings (the app's class unless ``of`` names another composition) from defaults plus
    ``overrides``, ignoring any ``.env`` file. Registered voices and the shared reference cache go to a
    fresh directory of their own (not ``voices/`` in the checkout), so no test sees another's voices or
    cached encodes."""
    overrides.setdefault("VOICES_DIR", tempfile.mkdtemp(prefix="tts-voices-"))
    # frames and audio are compared exactly: MOSS in float32 on every machine (auto picks bf16 on a CPU
    # with bf16 matrix instructions) unless a test asks for its dtype
    for name in ("MOSS_LM_DTYPE", "MOSS_CODEC_DTYPE"):
        if name in of.model_fields:
            overrides.setdefault(name, "float32")
    # what depends on the machine's speed is off unless a test asks for it: windows (MOSS: chunks) cut at
    # a deadline (the audio would depend on timing) and admission on measured rates (a loaded test machine
    # refuses) and a first window lengthened to cover the measured decode time
    if "STREAM_DEADLINE_CUTS" in of.model_fields:
        overrides.setdefault("STREAM_DEADLINE_CUTS", False)
        overrides.setdefault("STREAM_FIRST_COVER", 0.0)
    if "MOSS_DEADLINE_CUTS" in of.model_fields:
        overrides.setdefault("MOSS_DEADLINE_CUTS", False)
    overrides.setdefault("VIABILITY_CHECK", False)
    return of(_env_file=None, **overrides)


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen3 TTS LM (random weights, full speech vocabulary) written once per session, as the demo
    has it: with the planted stop schedule, so a generation ends by itself after 2-5 s of codes."""
    return write_tiny_lm(tmp_path_factory.mktemp("tiny_lm"), seed=0)


@pytest.fixture(scope="session")
def plain_lm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same LM without the stop schedule: a generation runs to its ``max_tokens`` (or until closed),
    for tests that need one to outlive something else by far more than a few seconds of codes."""
    return write_tiny_lm(tmp_path_factory.mktemp("plain_lm"), seed=0, stop_schedule=False)


@pytest.fixture(scope="session")
def tiny_codec_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random NeuCodec checkpoint (``pytorch_model.bin`` + ``neucodec_config.json``, seed 0)."""
    return write_codec_checkpoint(tmp_path_factory.mktemp("codec") / "tiny")


@pytest.fixture(scope="session")
def moss_tts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random MOSS-TTS-Realtime checkpoint in the official layout (seed 0), written once, as the
    demo has it: with the planted stop schedule, so a turn ends by itself after 2-5 s of frames."""
    return write_moss_tts(tmp_path_factory.mktemp("moss_tts") / "moss_tts", seed=0)


@pytest.fixture(scope="session")
def plain_moss_tts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same checkpoint without the stop schedule: a turn runs to its frame cap."""
    return write_moss_tts(tmp_path_factory.mktemp("plain_moss_tts") / "moss_tts", seed=0, stop_schedule=False)


@pytest.fixture(scope="session")
def tiny_moss_codec_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random MOSS codec checkpoint (official layout, seed 0), written once per session."""
    from app.families.moss.fixtures.codec import write_moss_codec

    return write_moss_codec(tmp_path_factory.mktemp("moss_codec") / "tiny")
