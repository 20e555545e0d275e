"""Stitcher: the first audio waits for the lead an LM near real time needs. Its listener starts when the
first chunk goes out (``release_at``), late enough that the shortest window a cut may make after it is
decoded before the listener runs dry, at the pace the LM kept so far; a faster LM, one that sent
everything at once, a stream without deadline cuts and a later part are not held."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from app.audio.round_cost import RoundCost
from app.audio.stitcher import PACE_HOLD_MAX_S, DeadlineCuts, Stitcher, StitchSchedule
from tests.audio.test_stitcher import SPT, FakeDecoder, random_codes
from tests.audio.test_stitcher_cuts import RATE, Clock

DECODE_S = 0.03
CUTS = DeadlineCuts()  # the defaults: 0.08 s margin or 1.5 decodes, cuts of at least 10 codes
SCHEDULE = StitchSchedule(10, 6.0, 100, 2, 3, 0, cuts=CUTS)  # first window: 10 own + 2 future codes


class TimedDecoder(FakeDecoder):
    """A decode that takes ``seconds`` on the test's clock."""

    def __init__(self, clock: Clock, seconds: float = DECODE_S) -> None:
        super().__init__(context=False)
        self.clock = clock
        self.seconds = seconds

    async def __call__(self, codes: list[int], deadline: float | None = None) -> np.ndarray:
        self.clock.now += self.seconds
        return await super().__call__(codes, deadline)


async def paced(stitcher: Stitcher, clock: Clock, codes: list[int], gap_s: float) -> None:
    """Push ``codes`` one at a time, ``gap_s`` apart on the clock (the first at its current time)."""
    for i, code in enumerate(codes):
        if i:
            clock.now += gap_s
        await stitcher.push([code])


async def test_a_real_time_lm_holds_the_first_audio_for_the_next_cuts_codes() -> None:
    clock = Clock()
    stitcher = Stitcher(TimedDecoder(clock), SCHEDULE, clock=clock, sample_rate=RATE)
    codes = random_codes(40)
    await paced(stitcher, clock, codes[:12], 0.02)  # 50 codes/s: the 12th at 0.22 s, decoded by 0.25 s
    # the next cut owns 10 codes: 10 more arrive by 0.42 s; the listener must still have 1.5 decodes
    # (0.045 s) then, so its 0.2 s of audio starts at 0.265 s, not at 0.25 s
    assert stitcher.release_at == pytest.approx(0.22 + 10 / 50 + 1.5 * DECODE_S - 10 * SPT / RATE)
    assert stitcher.playback.end == pytest.approx(stitcher.release_at + 0.2)
    for i in range(12, 22):  # on the LM's timeline (the 13th came during the decode): the 22nd at 0.42 s
        clock.now = max(clock.now, 0.02 * i)
        await stitcher.push([codes[i]])
    assert clock.now == pytest.approx(0.42) and stitcher.cut_due_in() == 0.0
    assert await stitcher.cut()
    assert stitcher.stall_s == 0.0 and stitcher.playback.end - clock.now > 0.01  # in time, to spare


async def test_the_first_part_of_a_long_input_is_held_too() -> None:
    """A part's ``due`` says None while no listener plays: it is the first audio."""
    clock = Clock()
    stitcher = Stitcher(TimedDecoder(clock), SCHEDULE, clock=clock, sample_rate=RATE, due=lambda: None)
    await paced(stitcher, clock, random_codes(12), 0.02)
    assert stitcher.release_at == pytest.approx(0.265)


async def test_under_a_load_the_hold_counts_the_cuts_round_not_the_first_decodes_queue() -> None:
    """The first decode waited 0.2 s behind other streams' first windows: 1.5 times that would hold the
    first audio, but the next cut's round (1.2 x (10 ms + 4 streams x 15 codes x 1 ms)) fits its lead."""
    clock = Clock()
    load = RoundCost(fixed_s=0.01, per_code_s=0.001, streams=4, cover=1.2)
    decoder = TimedDecoder(clock, seconds=0.2)
    stitcher = Stitcher(decoder, SCHEDULE, clock=clock, sample_rate=RATE, load=lambda: load)
    await paced(stitcher, clock, random_codes(12), 0.02)
    assert len(decoder.calls) == 1 and stitcher.release_at is None
    assert stitcher.playback.end == pytest.approx(0.22 + 0.2 + 0.2)  # from the decode's end


async def test_an_lm_twice_real_time_is_not_held() -> None:
    clock = Clock()
    stitcher = Stitcher(TimedDecoder(clock), SCHEDULE, clock=clock, sample_rate=RATE)
    await paced(stitcher, clock, random_codes(12), 0.01)
    assert stitcher.release_at is None
    assert stitcher.playback.end == pytest.approx(0.11 + DECODE_S + 0.2)  # from the decode's end


async def test_codes_that_came_at_once_are_not_held() -> None:
    clock = Clock()
    stitcher = Stitcher(TimedDecoder(clock), SCHEDULE, clock=clock, sample_rate=RATE)
    await stitcher.push(random_codes(12))
    assert stitcher.release_at is None


async def test_the_first_audio_waits_only_so_long() -> None:
    clock = Clock()
    schedule = dataclasses.replace(SCHEDULE, cuts=DeadlineCuts(min_cut_tokens=40))
    stitcher = Stitcher(TimedDecoder(clock), schedule, clock=clock, sample_rate=RATE)
    await paced(stitcher, clock, random_codes(12), 0.02)  # a cut needs 40 more codes: 0.8 s at 50 codes/s
    assert stitcher.release_at == pytest.approx(0.22 + DECODE_S + PACE_HOLD_MAX_S)


async def test_an_lm_far_slower_than_real_time_is_not_held() -> None:
    """Its listener runs dry later whatever the first wait (an embedded LM on a CPU)."""
    clock = Clock()
    stitcher = Stitcher(TimedDecoder(clock), SCHEDULE, clock=clock, sample_rate=RATE)
    await paced(stitcher, clock, random_codes(12), 0.1)  # 10 codes/s: a fifth of real time
    assert stitcher.release_at is None


@pytest.mark.parametrize("later_part", [False, True])
async def test_no_hold_without_cuts_or_for_a_later_part(later_part: bool) -> None:
    clock = Clock()
    schedule = SCHEDULE if later_part else StitchSchedule(10, 6.0, 100, 2, 3, 0)
    due = (lambda: 0.0) if later_part else None  # a listener already playing reaches it now
    stitcher = Stitcher(TimedDecoder(clock), schedule, clock=clock, sample_rate=RATE, due=due)
    await paced(stitcher, clock, random_codes(12), 0.02)
    assert stitcher.release_at is None
