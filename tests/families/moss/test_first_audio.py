"""The first audio of a MOSS request leaves as soon as its first frame exists (MOSS_FIRST_CHUNK_FRAMES=1,
the default), counted with a stand-in engine that makes one frame per step the test allows; the audio
of the whole request is the one-shot decode of its frames whatever the chunking."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch

from app.core.stats import UtteranceStats
from app.families.moss.family import MossFamily
from app.families.moss.lm.types import FrameJob
from app.interleave.service import Interleave
from app.observability.metrics import Metrics
from tests.fakes.fake_moss import FakeFrameEngine, FakePrompter, fake_lm
from tests.families.moss.conftest import moss_settings
from tests.families.moss.test_family import job

WORDS = 10  # 20 frames with the stand-in engine


@dataclass
class SteppedEngine(FakeFrameEngine):
    """The stand-in engine, one frame per ``steps.release()``; ``asks`` gets the number of each frame
    as its consumer asks for it (1 for the first)."""

    steps: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(0))
    asks: asyncio.Queue[int] = field(default_factory=asyncio.Queue)
    made: int = 0

    async def stream(self, job: FrameJob, *, admitted: bool = False) -> AsyncGenerator[np.ndarray, None]:
        self.jobs.append(job)
        self.open_rows += 1
        try:
            for frame in self.frames_for(job):
                self.asks.put_nowait(self.made + 1)
                await self.steps.acquire()
                self.made += 1
                yield frame[None]
        finally:
            self.open_rows -= 1


async def frames_before_first_audio(
    chunks: AsyncGenerator[np.ndarray, None], engine: SteppedEngine
) -> tuple[int, np.ndarray]:
    """Let the engine make one frame at a time until the first chunk comes: the frames it took, and it.
    After each frame either the chunk comes or the stream asks for the next frame (it decodes nothing
    in between), so the count is exact."""
    first = asyncio.ensure_future(anext(chunks))
    assert await asyncio.wait_for(engine.asks.get(), 30) == 1
    while True:
        engine.steps.release()
        asked = asyncio.ensure_future(engine.asks.get())
        done, _ = await asyncio.wait({first, asked}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        assert done, "neither audio nor a request for the next frame"
        if first in done:
            asked.cancel()
            return engine.made, first.result()


@pytest.mark.parametrize(("overrides", "frames"), [({}, 1), ({"MOSS_FIRST_CHUNK_FRAMES": 2}, 2)])
async def test_first_audio_after_the_first_frame(
    tiny_moss_codec_dir: Path, overrides: dict[str, object], frames: int
) -> None:
    """The default first decode takes one frame; the former default (2) waited for a second one."""
    settings = moss_settings(tiny_moss_codec_dir, **overrides)
    engine = SteppedEngine()
    family = MossFamily(
        settings,
        Interleave.from_settings(settings),
        Metrics(),
        lm_loader=lambda s, device: fake_lm(engine, FakePrompter()),
    )
    await family.start()
    try:
        chunks = (await family.plan(job(family, " ".join(["word"] * WORDS)))).stream(UtteranceStats())
        made, first = await frames_before_first_audio(chunks, engine)
        assert (made, first.size) == (frames, frames * 1920)
        for _ in range(2 * WORDS):
            engine.steps.release()
        audio = np.concatenate([first] + [chunk async for chunk in chunks])
        assert family.codec is not None
        with torch.inference_mode():
            whole = family.codec.codec.decode(torch.from_numpy(engine.frames_for(engine.jobs[-1])))
    finally:
        await family.close()
    np.testing.assert_allclose(audio, whole.numpy().reshape(-1), atol=1e-4, rtol=1e-4)
    assert audio.size == 2 * WORDS * 1920
