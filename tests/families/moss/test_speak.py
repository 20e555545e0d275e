"""speak: frames to PCM through a codec stream, in chunks that start small and double; an LM slower than
twice real time gets the frames there are decoded before its listener runs dry."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import looptime
import numpy as np
import pytest
import torch

from app.audio.playback import Playback
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


class PacedLM:
    """One frame per block at ``speed`` times real time (12.5 frames a second), on a fixed timeline of the
    event loop's clock."""

    def __init__(self, frames: np.ndarray, speed: float) -> None:
        self.frames, self.gap_s = frames, 0.08 / speed

    async def __aiter__(self) -> AsyncIterator[np.ndarray]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        for index, frame in enumerate(self.frames):
            await asyncio.sleep(max(0.0, started + (index + 1) * self.gap_s - loop.time()))
            yield frame[None]


class SlowDecode(Recorder):
    """A Recorder whose decodes take 10 ms plus 2 ms a frame."""

    async def __call__(self, chunk: np.ndarray) -> np.ndarray:
        await asyncio.sleep(0.01 + 0.002 * len(chunk))
        return await super().__call__(chunk)


def listened(speed: float, cuts: bool) -> tuple[float, list[int], np.ndarray]:
    """30 frames at ``speed`` through speak on a simulated clock: the stall of a listener who starts at the
    first chunk, the decode sizes and the audio."""
    loop = looptime.new_event_loop(start=0.0)

    async def run() -> tuple[float, list[int], np.ndarray]:
        decode, listener, chunks = SlowDecode(), Playback(24_000), []
        frames = speak(
            aiter(PacedLM(frames_of(30), speed)),
            decode,
            ChunkSchedule(1, 8, cuts),
            100,
            UtteranceStats(),
            [],
            clock=loop.time,
        )
        async for chunk in frames:
            listener.emit(chunk.size, loop.time())
            chunks.append(chunk)
        return listener.stall_s, decode.sizes, np.concatenate(chunks)

    try:
        return loop.run_until_complete(run())
    finally:
        loop.close()


@pytest.mark.parametrize("speed", [1.0, 1.3, 1.7])
def test_an_lm_below_twice_real_time_gets_the_frames_there_are_before_its_listener_runs_dry(
    speed: float,
) -> None:
    stall_s, sizes, audio = listened(speed, cuts=True)
    assert stall_s < 0.001 and sum(sizes) == 30
    np.testing.assert_array_equal(audio, np.repeat(frames_of(30)[:, 0].astype(np.float32), FRAME))
    uncut_stall_s, uncut_sizes, _ = listened(speed, cuts=False)
    assert uncut_sizes == [1, 2, 4, 8, 8, 7] and uncut_stall_s > 0.05  # the doubling sizes wait


def test_an_lm_at_three_times_real_time_is_not_cut() -> None:
    stall_s, sizes, _ = listened(3.0, cuts=True)
    assert stall_s == 0.0 and sizes == [1, 2, 4, 8, 8, 7]


def test_an_lm_far_slower_than_real_time_keeps_the_doubling_sizes() -> None:
    """Its listener runs dry whatever the chunking (a CPU): cuts would only add codec calls."""
    _, sizes, _ = listened(0.5, cuts=True)
    assert sizes == [1, 2, 4, 8, 8, 7]


def test_the_time_a_turn_waited_for_its_text_does_not_slow_its_pace() -> None:
    """A realtime row parks while its text runs dry: after the wait its frames come near real time again
    and are still cut, though over the whole span they came slower than real time."""
    loop = looptime.new_event_loop(start=0.0)
    parked: list[float] = []

    async def frames() -> AsyncIterator[np.ndarray]:
        for index, frame in enumerate(frames_of(30)):
            if index == 10:  # the text ran dry for 1.5 s
                await asyncio.sleep(1.5)
                parked.append(1.5)
            await asyncio.sleep(0.08 / 1.2)
            yield frame[None]

    async def run(waited: Any) -> list[int]:
        decode = SlowDecode()
        schedule = ChunkSchedule(1, 8, True)
        chunks = speak(frames(), decode, schedule, 100, UtteranceStats(), [], parked=waited, clock=loop.time)
        async for _ in chunks:
            pass
        return decode.sizes

    try:
        counted = loop.run_until_complete(run(lambda: sum(parked)))
        parked.clear()
        uncounted = loop.run_until_complete(run(None))
    finally:
        loop.close()
    assert max(counted) <= 3 and max(uncounted[-3:]) == 8  # cut after the wait; the doubling sizes without
