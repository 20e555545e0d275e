"""The family with the real prompter of the tiny MOSS-TTS-Realtime checkpoint (and the stand-in engine):
history turns, text ids and the window as the real rows lay them out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from app.config import Settings
from app.core.errors import InvalidRequest
from app.core.family import ReferenceVoice
from app.families.moss.family import MossFamily
from app.families.moss.lm.loader import load_moss_lm
from app.families.moss.lm.prompt import MossPrompter
from app.families.moss.lm.stage import MossLM
from app.interleave.service import Interleave
from app.observability.metrics import Metrics
from tests.fakes.fake_moss import FakeFrameEngine
from tests.families.moss.conftest import moss_settings
from tests.families.moss.test_family import job, speak_all


@pytest.fixture
async def real_rows(
    tiny_moss_codec_dir: Path, moss_tts_dir: Path
) -> AsyncIterator[tuple[MossFamily, FakeFrameEngine]]:
    engine = FakeFrameEngine(frames=6)

    def loader(settings: Settings, device: str) -> MossLM:
        loaded = load_moss_lm(settings.MOSS_TTS_MODEL, device=device)
        return MossLM(MossPrompter(loaded.tokenizer, loaded.ids), engine, loaded.max_positions)

    settings = moss_settings(tiny_moss_codec_dir, MOSS_TTS_MODEL=str(moss_tts_dir))
    family = MossFamily(settings, Interleave.from_settings(settings), Metrics(), lm_loader=loader)
    await family.start()
    try:
        yield family, engine
    finally:
        await family.close()


async def test_history_rows_follow_the_turns(real_rows: tuple[MossFamily, FakeFrameEngine]) -> None:
    family, engine = real_rows
    assert family.lm is not None
    prompter, window = family.lm.prompter, family.lm.max_positions
    cold = await family.plan(job(family, "how are you", interleave_id="r"))
    assert cold.job.max_frames == min(1500, window - len(cold.job.prefill))
    await speak_all(family, job(family, "hello there", interleave_id="r"))
    first = engine.frames_for(engine.jobs[-1])
    warm = await family.plan(job(family, "how are you", interleave_id="r"))
    (turn,) = warm.history_turns
    assert turn.text_ids == prompter.text_ids("hello there")
    np.testing.assert_array_equal(turn.frames, first)
    # the earlier turn's rows (prefix, text, frames, EOS row) sit between the system block and the new turn
    assert len(warm.job.prefill) > len(cold.job.prefill) + len(first)
    frames = warm.job.prefill[:, 1:]
    assert any(np.array_equal(frames[i : i + len(first)], first) for i in range(len(frames) - len(first) + 1))


async def test_a_text_longer_than_the_window_is_cut_and_a_voice_that_fills_it_is_400(
    real_rows: tuple[MossFamily, FakeFrameEngine],
) -> None:
    family, _ = real_rows
    assert family.lm is not None
    window = family.lm.max_positions
    text = "word " * 819  # MAX_INPUT_CHARS: 409 s at the slow pace, 5119 frames
    planned = await family.plan(job(family, text.strip()))
    assert len(planned.parts) > 1 and " ".join(part.text for part in planned.parts) == text.strip()
    for part in planned.parts:
        assert len(part.job.prefill) + part.job.max_frames <= window and part.job.max_frames == 1500
    reference = ReferenceVoice("", (1,) * 16 * window, 16)
    with pytest.raises(InvalidRequest) as refused:
        await family.plan(job(family, "hello there", voice=reference))
    assert refused.value.code == "context_length_exceeded" and refused.value.param == "reference_audio"


@pytest.mark.parametrize(("rows", "expected"), [(0, 3), (1, 1)])
def test_the_settings_size_the_real_engine(
    tiny_moss_codec_dir: Path, moss_tts_dir: Path, rows: int, expected: int
) -> None:
    from app.families.moss.lm.stage import load_lm

    settings = moss_settings(
        tiny_moss_codec_dir,
        MOSS_TTS_MODEL=str(moss_tts_dir),
        MOSS_MAX_BATCH=3,
        MOSS_CACHE_POSITIONS=900,
        MOSS_PREFILL_ROWS=rows,
    )
    details = load_lm(settings, "cpu").engine.details()
    assert details["max_batch"] == 3 and details["max_cached_rows"] == 900
    assert details["prefill_rows"] == expected  # 0: as many as MOSS_MAX_BATCH
