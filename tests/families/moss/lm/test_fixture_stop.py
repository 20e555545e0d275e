"""The tiny MOSS-TTS-Realtime checkpoint's planted stop schedule: a turn without ``max_tokens`` ends by
itself (EOS on codebook 0) after 2-5 s of frames, alone or batched, greedy or sampled, with or without a
voice reference and history turns. The plain random model (``stop_schedule=False``) runs to its cap."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import numpy as np
import pytest

from app.config import Settings
from app.families.moss.lm.engine import MossFrameEngine
from app.families.moss.lm.loader import LoadedMoss, load_moss_lm
from app.families.moss.lm.prompt import MossPrompter
from app.families.moss.lm.types import FrameJob, FrameSampling, Turn

pytestmark = pytest.mark.slow  # 20 turns of about 40 frames per engine

FRAMES_PER_S = 12.5
SHORTEST, LONGEST = round(2 * FRAMES_PER_S), round(5 * FRAMES_PER_S)  # the promise: 2-5 s of frames
CAP = Settings.model_fields["MOSS_DEFAULT_MAX_TOKENS"].default  # what a request without max_tokens gets


@pytest.fixture(scope="module")
def loaded(moss_tts_dir: Path) -> LoadedMoss:
    return load_moss_lm(str(moss_tts_dir))


def job(prompter: MossPrompter, i: int, max_frames: int = CAP) -> FrameJob:
    """Turn ``i``: a text of 1-60 words; a voice reference one time in three, history turns another;
    greedy one time in four, at temperature 2 one in five, else the default sampling."""
    rng = random.Random(i)
    codes = np.random.default_rng(i)
    text = " ".join(
        rng.choice(["Hello", "there,", "a", "random", "model", "speaks."]) for _ in range(rng.randint(1, 60))
    )
    reference = codes.integers(0, 1024, size=(rng.randint(5, 150), 16)) if i % 3 == 1 else None
    history = []
    if i % 3 == 2:
        history = [
            Turn(
                prompter.text_ids("An earlier turn."), codes.integers(0, 1024, size=(rng.randint(3, 80), 16))
            )
            for _ in range(rng.randint(1, 3))
        ]
    if i % 4 == 3:
        sampling = FrameSampling(temperature=0.0)
    else:
        sampling = FrameSampling(temperature=2.0 if i % 5 == 4 else FrameSampling().temperature, seed=i)
    return prompter.job(text, reference=reference, history=history, sampling=sampling, max_frames=max_frames)


async def frames(engine: MossFrameEngine, the_job: FrameJob) -> int:
    count = 0
    async for chunk in engine.stream(the_job):
        count += len(chunk)
    return count


def assert_ended_by_the_schedule(counts: list[int]) -> None:
    assert all(SHORTEST <= count <= LONGEST for count in counts), counts  # far below the cap: EOS ended it
    assert len(set(counts)) > 5, counts  # a spread between requests, not one fixed length


@pytest.mark.parametrize("rows", [1, 8], ids=["alone", "batched"])
async def test_turns_end_within_2_to_5_s(loaded: LoadedMoss, rows: int, one_torch_thread: None) -> None:
    prompter = MossPrompter(loaded.tokenizer, loaded.ids)
    engine = MossFrameEngine(loaded, max_batch=rows)
    engine.start()
    try:
        counts = await asyncio.gather(*(frames(engine, job(prompter, i)) for i in range(20)))
    finally:
        await engine.close()
    assert engine.peak_rows == rows
    assert_ended_by_the_schedule(list(counts))


async def test_without_the_schedule_a_turn_runs_to_its_cap(
    plain_moss_tts_dir: Path, one_torch_thread: None
) -> None:
    loaded = load_moss_lm(str(plain_moss_tts_dir))
    prompter = MossPrompter(loaded.tokenizer, loaded.ids)
    engine = MossFrameEngine(loaded)
    engine.start()
    try:
        for i in (0, 3):  # sampled, greedy
            assert await frames(engine, job(prompter, i, max_frames=2 * LONGEST)) == 2 * LONGEST
    finally:
        await engine.close()
