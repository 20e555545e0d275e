"""The frame engine with streamed text (``TextFeed``) on the tiny checkpoint: a turn's frames do not
depend on how its ids arrive; a starved row parks (no steps, its cache kept) and resumes with the same
frames; eight streamed turns batched equal each alone; a parked row is cancelled within one loop turn
and counts against the row limit."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from app.families.moss.lm.engine import MossFrameEngine
from app.families.moss.lm.feed import TextFeed
from app.families.moss.lm.loader import LoadedMoss, load_moss_lm
from app.families.moss.lm.prompt import MossPrompter
from app.families.moss.lm.types import DELAY, FrameJob, FrameSampling

TEXT = "Streamed words arrive a few at a time, and the turn goes on speaking."
GREEDY = FrameSampling(temperature=0.0)
SEEDED = FrameSampling(seed=7, temperature=1.0, top_k=50, top_p=0.95)


@pytest.fixture(scope="module")
def loaded(moss_tts_dir: Path) -> LoadedMoss:
    return load_moss_lm(str(moss_tts_dir))


@pytest.fixture(scope="module")
def prompter(loaded: LoadedMoss) -> MossPrompter:
    return MossPrompter(loaded.tokenizer, loaded.ids)


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread: None) -> None:
    """Torch on one thread (the suite's fixture)."""


async def collect(engine: MossFrameEngine, job: FrameJob) -> np.ndarray:
    blocks = [frames async for frames in engine.stream(job)]
    return np.concatenate(blocks)


async def streamed(
    engine: MossFrameEngine,
    prompter: MossPrompter,
    ids: list[int],
    sampling: FrameSampling,
    step: int,
    frames: int,
    starve: bool = False,
) -> np.ndarray:
    """``ids`` fed ``step`` at a time after the first ``DELAY``; with ``starve``, the rest only once the
    row has parked."""
    feed = TextFeed(ids[:DELAY])
    job = prompter.ids_job(ids[:DELAY], reference=None, sampling=sampling, max_frames=frames, feed=feed)
    task = asyncio.create_task(collect(engine, job))
    if starve:
        while engine.parked == 0:
            await asyncio.sleep(0.005)
        steps = engine.steps
        await asyncio.sleep(0.05)
        assert engine.steps == steps  # parked: it takes no steps
    for start in range(DELAY, len(ids), step):
        feed.extend(ids[start : start + step])
        await asyncio.sleep(0)
    feed.end()
    return await task


def whole(prompter: MossPrompter, ids: list[int], sampling: FrameSampling, frames: int) -> FrameJob:
    return prompter.ids_job(ids, reference=None, sampling=sampling, max_frames=frames)


@pytest.mark.parametrize("sampling", [GREEDY, SEEDED], ids=["greedy", "seeded"])
async def test_frames_do_not_depend_on_how_the_ids_arrive(
    loaded: LoadedMoss, prompter: MossPrompter, sampling: FrameSampling
) -> None:
    ids = list(prompter.text_ids(TEXT))
    frames = len(ids) + 8
    engine = MossFrameEngine(loaded, prefill_chunk=64)
    engine.start()
    try:
        expected = await collect(engine, whole(prompter, ids, sampling, frames))
        for step in (1, 3, 17):
            got = await streamed(engine, prompter, ids, sampling, step, frames)
            assert np.array_equal(got, expected), step
        starved = await streamed(engine, prompter, ids, sampling, 5, frames, starve=True)
        assert np.array_equal(starved, expected)
        assert engine.parks >= 1
    finally:
        await engine.close()


async def test_eight_streamed_turns_batched_equal_each_alone(
    loaded: LoadedMoss, prompter: MossPrompter
) -> None:
    texts = [f"Turn number {n} says something of its own, word by word." for n in range(8)]
    samplings = [FrameSampling(seed=n, temperature=0.9) if n % 2 else GREEDY for n in range(8)]
    ids = [list(prompter.text_ids(text)) for text in texts]
    frames = [len(i) + 4 for i in ids]
    alone = []
    engine = MossFrameEngine(loaded, max_batch=8, prefill_chunk=128)
    engine.start()
    try:
        for i in range(8):
            alone.append(await collect(engine, whole(prompter, ids[i], samplings[i], frames[i])))
        together = await asyncio.gather(
            *(streamed(engine, prompter, ids[i], samplings[i], 1 + i, frames[i]) for i in range(8))
        )
    finally:
        await engine.close()
    assert engine.peak_rows >= 4
    for want, have in zip(alone, together, strict=True):
        assert np.array_equal(want, have)


async def test_a_parked_row_holds_its_slot_and_is_cancelled_within_a_turn(
    loaded: LoadedMoss, prompter: MossPrompter
) -> None:
    ids = list(prompter.text_ids(TEXT))
    engine = MossFrameEngine(loaded, max_batch=1, prefill_chunk=64)
    engine.start()
    try:
        feed = TextFeed(ids[:DELAY])
        job = prompter.ids_job(ids[:DELAY], reference=None, sampling=GREEDY, max_frames=50, feed=feed)
        frames = engine.stream(job)
        first = await anext(frames)
        assert len(first) >= 1
        while engine.parked == 0:
            await asyncio.sleep(0.005)
        other = asyncio.create_task(collect(engine, whole(prompter, ids, GREEDY, 3)))
        await asyncio.sleep(0.05)
        assert not other.done() and engine.pending == 1  # the parked row holds the only slot
        await frames.aclose()  # the client left: the parked row goes, the slot frees
        assert engine.active == 0 or engine.parked == 0
        got = await asyncio.wait_for(other, 30)
        assert len(got) == 3 and engine.parked == 0
    finally:
        await engine.close()
