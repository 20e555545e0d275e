"""The MOSS family on the tiny MOSS codec with the stand-in LM stage (tests/fakes/fake_moss.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import torch

from app.config import Settings
from app.families.moss.family import MossFamily
from app.interleave.service import Interleave
from app.observability.metrics import Metrics
from tests.conftest import make_settings
from tests.fakes.fake_moss import FakeFrameEngine, FakePrompter, fake_lm


def moss_settings(codec_dir: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "MODEL_FAMILIES": ["moss"],
        "MOSS_CODEC_MODEL": str(codec_dir),
        "DEVICE": "cpu",
        "INTERLEAVE_STORE": "memory",
    }
    return make_settings(**(values | overrides))


class Parts:
    """The family under test and its stand-ins."""

    def __init__(self, family: MossFamily, engine: FakeFrameEngine, prompter: FakePrompter) -> None:
        self.family = family
        self.engine = engine
        self.prompter = prompter


def build(settings: Settings, max_positions: int = 4096) -> Parts:
    engine, prompter = FakeFrameEngine(), FakePrompter()
    family = MossFamily(
        settings,
        Interleave.from_settings(settings),
        Metrics(),
        lm_loader=lambda s, device: fake_lm(engine, prompter, max_positions),
    )
    return Parts(family, engine, prompter)


@pytest.fixture
async def moss(tiny_moss_codec_dir: Path) -> AsyncIterator[Parts]:
    """A started family (default settings on the tiny codec), closed after the test."""
    parts = build(moss_settings(tiny_moss_codec_dir))
    await parts.family.start()
    try:
        yield parts
    finally:
        await parts.family.close()


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """The tiny codec's ops are microseconds: one torch thread avoids OpenMP waits on a shared CPU."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)
