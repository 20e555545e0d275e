"""speak: frames to PCM through a codec stream, in chunks that start small and double."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
import torch

from app.core.stats import UtteranceStats
from app.families.moss.codec.loading import load_codec
from app.families.moss.codec.service import MossCodecService
from app.families.moss.speak import ChunkSchedule, speak

FRAME = 1920


def frames_of(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1024, size=(count, 16), dtype=np.int64)


async def blocks(frames: np.ndarray, size: int) -> AsyncIterator[np.ndarray]:
    for start in range(0, len(frames), size):
        yield frames[start : start + size]


class Recorder:
    """A decode that returns a ramp per frame and records the chunk sizes."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def __call__(self, chunk: np.ndarray) -> np.ndarray:
        assert chunk.shape[1] == 16 and chunk.dtype == np.int64
        self.sizes.append(len(chunk))
        return np.repeat(chunk[:, 0].astype(np.float32), FRAME)


def test_chunk_sizes_double_up_to_the_largest() -> None:
    sizes = ChunkSchedule(2, 8).sizes()
    assert [next(sizes) for _ in range(5)] == [2, 4, 8, 8, 8]
    sizes = ChunkSchedule(1, 6).sizes()
    assert [next(sizes) for _ in range(5)] == [1, 2, 4, 6, 6]
    with pytest.raises(ValueError):
        ChunkSchedule(4, 2)
    with pytest.raises(ValueError):
        ChunkSchedule(0, 2)


@pytest.mark.parametrize(
    ("arrival", "schedule", "expected"),
    [
        (1, ChunkSchedule(2, 8), [2, 4, 8, 6]),  # frames one by one: the ramp, then the rest at the end
        (20, ChunkSchedule(2, 8), [8, 8, 4]),  # all at once: as much as a decode takes
        (3, ChunkSchedule(1, 4), [3, 3, 4, 4, 4, 2]),  # a block beyond the next size is taken whole
    ],
)
async def test_decodes_follow_the_schedule(
    arrival: int, schedule: ChunkSchedule, expected: list[int]
) -> None:
    frames = frames_of(20)
    decode, stats, made = Recorder(), UtteranceStats(), []
    audio = [chunk async for chunk in speak(blocks(frames, arrival), decode, schedule, 100, stats, made)]
    assert decode.sizes == expected
    np.testing.assert_array_equal(np.concatenate(audio), np.repeat(frames[:, 0].astype(np.float32), FRAME))
    np.testing.assert_array_equal(np.concatenate(made), frames)
    assert (stats.codes, stats.samples, stats.decodes, stats.finish_reason) == (
        20,
        20 * FRAME,
        len(expected),
        "stop",
    )


async def test_the_frame_cap_is_a_length_finish() -> None:
    stats = UtteranceStats()
    chunks = speak(blocks(frames_of(6), 1), Recorder(), ChunkSchedule(), 6, stats, [])
    assert sum([len(c) async for c in chunks]) == 6 * FRAME
    assert stats.finish_reason == "length"


async def test_no_frames_no_audio() -> None:
    stats = UtteranceStats()
    decode = Recorder()
    assert [c async for c in speak(blocks(frames_of(0), 1), decode, ChunkSchedule(), 10, stats, [])] == []
    assert decode.sizes == [] and stats.finish_reason == "stop"


async def test_audio_does_not_depend_on_chunking(tiny_moss_codec_dir: Path) -> None:
    """Through the real (tiny) codec stream: any schedule gives the one-shot decode of the frames."""
    codec = load_codec(str(tiny_moss_codec_dir), with_encoder=False)
    service = MossCodecService(codec, "cpu")
    service.start()
    frames = frames_of(23, seed=3)
    try:
        outputs = []
        for schedule, arrival in (
            (ChunkSchedule(1, 8), 1),
            (ChunkSchedule(3, 5), 2),
            (ChunkSchedule(8, 8), 23),
        ):
            stream = service.open_stream()
            chunks = speak(blocks(frames, arrival), stream.decode, schedule, 100, UtteranceStats(), [])
            outputs.append(np.concatenate([c async for c in chunks]))
            stream.close()
    finally:
        await service.close()
    with torch.inference_mode():
        whole = codec.decode(torch.from_numpy(frames)).numpy().reshape(-1)
    for audio in outputs:
        assert audio.shape == (23 * FRAME,)
        np.testing.assert_allclose(audio, whole, atol=1e-4, rtol=1e-4)


async def paced(frames: np.ndarray, pause_s: float, parked: list[float]) -> AsyncIterator[np.ndarray]:
    """The first frame, a pause (recorded in ``parked`` as a wait for text), then the rest."""
    yield frames[:1]
    await asyncio.sleep(pause_s)
    parked.append(pause_s)
    yield frames[1:]


@pytest.mark.parametrize("parked_counts", [False, True])
async def test_a_listener_who_runs_dry_is_a_stall_unless_the_turn_waited_for_its_text(
    parked_counts: bool,
) -> None:
    stats, parked = UtteranceStats(), []
    waited = (lambda: sum(parked)) if parked_counts else None
    chunks = speak(
        paced(frames_of(2), 0.3, parked), Recorder(), ChunkSchedule(1, 1), 10, stats, [], parked=waited
    )
    assert len([c async for c in chunks]) == 2
    # 80 ms of audio, then 0.3 s without: about 0.22 s dry, unless that time was the text's
    assert stats.stall_s == (0.0 if parked_counts else pytest.approx(0.22, abs=0.05))


@pytest.mark.parametrize(("lead_s", "stall_s"), [(0.5, 0.0), (-0.2, 0.2)])
async def test_a_later_parts_listener_counts_from_when_it_reaches_the_part(
    lead_s: float, stall_s: float
) -> None:
    stats, reached = UtteranceStats(), time.monotonic() + lead_s
    chunks = speak(
        blocks(frames_of(3), 3), Recorder(), ChunkSchedule(3, 3), 10, stats, [], due=lambda: reached
    )
    assert len([c async for c in chunks]) == 1
    assert stats.stall_s == pytest.approx(stall_s, abs=0.05)
