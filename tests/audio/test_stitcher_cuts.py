"""Stitcher deadline cuts and the simulated listener: a window cut at the codes that exist when the
listener is about to run dry, the stall measure, and what stays as it was without pressure."""

from __future__ import annotations

import random

import numpy as np
import pytest

from app.audio.playback import Playback
from app.audio.stitcher import DeadlineCuts, Stitcher, StitchSchedule
from tests.audio.test_stitcher import SPT, FakeDecoder, joined, random_codes, random_sizes, stitch

RATE = SPT * 50  # samples per second: one code is 20 ms
CUTS = DeadlineCuts(min_margin_s=0.1, margin_factor=0.0, min_cut_tokens=3, cut_growth=0.0)
# first 10, growth 6, max 100, future 2, past 3, 48-sample crossfade
SCHEDULE = StitchSchedule(10, 6.0, 100, 2, 3, 48, cuts=CUTS)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_playback_counts_the_time_the_buffer_stood_empty() -> None:
    playback = Playback(sample_rate=100)
    playback.emit(50, now=10.0)  # 0.5 s of audio: plays until 10.5
    playback.emit(50, now=10.2)  # in time: plays until 11.0
    playback.emit(100, now=11.3)  # 0.3 s late: plays from 11.3 to 12.3
    assert playback.end == pytest.approx(12.3) and playback.stall_s == pytest.approx(0.3)


async def test_a_window_is_cut_at_what_exists_when_the_listener_runs_short() -> None:
    clock = Clock()
    decoder = FakeDecoder(context=False)
    stitcher = Stitcher(decoder, SCHEDULE, clock=clock, sample_rate=RATE)
    codes = random_codes(200)
    out = await stitcher.push(codes[:12])  # window 0: 10 own + 2 future; plays 10 codes - 24 samples
    assert len(decoder.calls) == 1 and out
    assert stitcher.cut_due_in() is None  # no code of a next window yet
    out += await stitcher.push(codes[12:15])  # 15 - 2 future = 13: 3 codes of its own, the fewest
    end = stitcher.deadline()
    assert end is not None
    assert stitcher.cut_due_in() == pytest.approx(end - 0.1)  # due when 0.1 s (the margin) is left
    clock.now = end - 0.2  # more than the margin left: a cut is not due yet, and cut() does nothing
    assert stitcher.cut_due_in() == pytest.approx(0.1)
    out += await stitcher.push(codes[15:21])
    clock.now = end - 0.05
    assert stitcher.cut_due_in() == 0.0
    out += await stitcher.cut()
    assert decoder.calls[1] == codes[7:21]  # past 3 + own [10, 19) + future 2
    assert stitcher.cut_windows == 1 and stitcher.stall_s == 0.0
    # the schedule resumes with the window that was cut short (60 codes from 19)
    out += await stitcher.push(codes[21:80])
    assert len(decoder.calls) == 2  # 19 + 60 + 2 = 81 codes: not yet
    out += await stitcher.push(codes[80:81])
    assert decoder.calls[2] == codes[16:81]
    out += await stitcher.flush()
    np.testing.assert_array_equal(joined(out), decoder.decode_now(codes[:81]))
    assert stitcher.cut_due_in() is None  # finished


async def test_no_cut_below_the_fewest_codes_a_cut_may_own() -> None:
    clock = Clock()
    decoder = FakeDecoder(context=False)
    stitcher = Stitcher(decoder, SCHEDULE, clock=clock, sample_rate=RATE)
    await stitcher.push(random_codes(12))
    clock.now = 100.0  # the listener ran dry long ago
    await stitcher.push([1, 2, 3, 4])  # 16 codes: a cut owns [10, 14), 2 are its future context
    assert stitcher.cut_due_in() == 0.0 and await stitcher.cut()
    assert len(decoder.calls) == 2 and stitcher.cut_windows == 1
    await stitcher.push([5, 6])  # 18 - 2 = 16: 2 codes of its own, fewer than 3: no cut
    assert stitcher.cut_due_in() is None and await stitcher.cut() == []
    assert len(decoder.calls) == 2


async def test_cut_windows_emit_every_sample_once_and_stay_within_the_budget() -> None:
    cut = [await cut_run(seed) for seed in range(8)]
    assert sum(cut) >= 4  # most runs did cut windows


async def cut_run(seed: int) -> int:
    """Codes arrive at random times in random pieces, with a cut whenever one is due between them;
    whatever is cut, a local decoder's output equals the one-shot decode (every sample once), and the
    utterance decodes at most (1 + budget) codes per code unless its fixed contexts alone need more."""
    rng = random.Random(seed)
    schedule = StitchSchedule(10, 6.0, 100, 2, 3, 0, redecode_budget=0.5, cuts=CUTS)
    clock = Clock()
    decoder = FakeDecoder(context=False)
    stitcher = Stitcher(decoder, schedule, clock=clock, sample_rate=RATE)
    n = rng.randrange(50, 400)
    codes = random_codes(n, seed)
    chunks: list[np.ndarray] = []
    pos = 0
    for size in random_sizes(rng, n):
        clock.now += rng.random() * 0.2
        due = stitcher.cut_due_in()
        if due is not None and due <= 0:
            chunks += await stitcher.cut()
        chunks += await stitcher.push(codes[pos : pos + size])
        pos += size
    chunks += await stitcher.flush()
    audio = joined(chunks)
    np.testing.assert_array_equal(audio, decoder.decode_now(codes))
    assert stitcher.decoded == sum(len(call) for call in decoder.calls)
    windows = len(decoder.calls)
    fixed = n + windows * (schedule.past_tokens + schedule.future_tokens)
    assert stitcher.decoded <= max(n * 1.5, fixed)
    return stitcher.cut_windows


async def test_windows_cut_under_pressure_still_grow() -> None:
    """With ``cut_growth`` 1.5 a cut owns at least 1.5 times what the window before it owned: 15 codes
    after the 10 of the first window, then 23."""
    cuts = DeadlineCuts(min_margin_s=0.1, margin_factor=0.0, min_cut_tokens=3, cut_growth=1.5)
    schedule = StitchSchedule(10, 6.0, 100, 2, 3, 0, cuts=cuts)
    clock = Clock()
    decoder = FakeDecoder(context=False)
    stitcher = Stitcher(decoder, schedule, clock=clock, sample_rate=RATE)
    await stitcher.push(random_codes(12))
    clock.now = 100.0  # the listener ran dry long ago: every possible cut is due
    await stitcher.push(random_codes(14, seed=1))  # 26 - 2 = 24: 14 of its own, fewer than 15
    assert stitcher.cut_due_in() is None
    await stitcher.push([1])  # 15 of its own
    assert stitcher.cut_due_in() == 0.0 and await stitcher.cut()
    assert len(decoder.calls[1]) == 3 + 15 + 2
    await stitcher.push(random_codes(22, seed=2))
    assert stitcher.cut_due_in() is None  # 22 < ceil(1.5 * 15) = 23
    await stitcher.push([1])
    clock.now = 200.0  # the cut window's audio has been played too
    assert stitcher.cut_due_in() == 0.0


async def test_with_cuts_and_no_pressure_the_output_is_the_planned_schedule() -> None:
    """An LM faster than the listener (all codes at once, or a clock that never moves): no cut, the
    same windows and the same audio as without cuts, however the codes were split."""
    plain = StitchSchedule(**{**SCHEDULE.__dict__, "cuts": None})
    codes = random_codes(300)
    reference = FakeDecoder(context=True)
    expected = joined(await stitch(plain, codes, [], reference))
    rng = random.Random(1)
    for _ in range(5):
        decoder = FakeDecoder(context=True)
        got = joined(await stitch(SCHEDULE, codes, random_sizes(rng, 300), decoder))
        assert decoder.calls == reference.calls
        np.testing.assert_array_equal(got, expected)


def test_bad_cut_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="bad deadline cuts"):
        DeadlineCuts(min_cut_tokens=0)
    with pytest.raises(ValueError, match="bad deadline cuts"):
        DeadlineCuts(min_margin_s=-1)
