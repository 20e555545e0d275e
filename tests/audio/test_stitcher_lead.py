"""A stream that a listener already playing reaches later (a later part of a long input): its first
window sized by that lead, due then, cut before the listener gets there when the codes come slowly,
and a late start counted as a stall."""

from __future__ import annotations

import numpy as np
import pytest

from app.audio.round_cost import RoundCost
from app.audio.stitcher import Stitcher, StitchSchedule
from tests.audio.test_stitcher import FakeDecoder, joined, random_codes
from tests.audio.test_stitcher_cuts import CUTS, RATE, SCHEDULE, Clock


def lead_stitcher(due: float | None, clock: Clock) -> tuple[Stitcher, FakeDecoder]:
    decoder = FakeDecoder(context=False)
    return Stitcher(decoder, SCHEDULE, clock=clock, sample_rate=RATE, due=lambda: due), decoder


@pytest.mark.parametrize(
    ("lead_s", "first_own"),
    [
        (1.0, 100),  # 50 codes of lead, x6 growth: 300, at most the longest window (100)
        (0.1, 30),  # 5 codes of lead, x6
        (0.0, 10),  # due now: the configured first window
        (-0.5, 10),  # the listener got there already
    ],
)
async def test_the_first_window_is_sized_by_the_listeners_lead(lead_s: float, first_own: int) -> None:
    clock = Clock()
    clock.now = 5.0
    stitcher, decoder = lead_stitcher(5.0 + lead_s, clock)
    codes = random_codes(250)
    out = await stitcher.push(codes)  # an instant LM: every code at once
    assert decoder.calls[0] == codes[: first_own + SCHEDULE.future_tokens]
    assert decoder.deadlines[0] == 5.0 + lead_s  # due when the listener gets there, not now
    out += await stitcher.flush()
    np.testing.assert_array_equal(joined(out), decoder.decode_now(codes))  # every sample once


async def test_without_a_listener_the_first_window_is_the_configured_one() -> None:
    clock = Clock()
    stitcher, decoder = lead_stitcher(None, clock)  # nothing played yet
    await stitcher.push(random_codes(250))
    assert len(decoder.calls[0]) == SCHEDULE.first_tokens + SCHEDULE.future_tokens
    assert decoder.deadlines[0] is None


async def test_a_slow_lm_has_the_lead_window_cut_before_the_listener_gets_there() -> None:
    clock = Clock()
    stitcher, decoder = lead_stitcher(1.0, clock)
    codes = random_codes(100)
    assert await stitcher.push(codes[:30]) == []  # the lead window wants 100 codes of its own
    assert stitcher.cut_due_in() == pytest.approx(0.9)  # the margin (0.1 s) before the listener gets there
    clock.now = 0.92
    assert stitcher.cut_due_in() == 0.0
    out = await stitcher.cut()
    assert decoder.calls == [codes[:30]] and decoder.deadlines == [1.0]  # owns [0, 28), 2 of future
    assert stitcher.stall_s == 0.0  # out at 0.92, before the listener needed it
    clock.now = 1.3
    out += await stitcher.push(codes[30:])
    out += await stitcher.flush()
    np.testing.assert_array_equal(joined(out), decoder.decode_now(codes))


async def test_audio_after_the_listener_got_there_is_a_stall() -> None:
    clock = Clock()
    clock.now = 2.5
    stitcher, _ = lead_stitcher(2.0, clock)  # the parts before it ran out at 2.0
    await stitcher.push(random_codes(40))
    assert stitcher.stall_s == pytest.approx(0.5)


def test_under_a_load_the_lead_window_is_what_a_round_decodes_within_the_lead() -> None:
    load = RoundCost(fixed_s=0.05, per_code_s=0.002, streams=2, cover=1.2)
    schedule = StitchSchedule(10, 6.0, 400, 2, 3, 48, cuts=CUTS, load=load)
    context, tps = schedule.past_tokens + schedule.future_tokens, schedule.tokens_per_s
    own = schedule.lead_window(1.0)  # 50 codes of lead: x6 would be 300
    assert own == load.fit(50, context, tps) < 300
    assert load.cover * load.seconds(own + context) <= 1.0 < load.cover * load.seconds(own + 1 + context)
    assert schedule.lead_window(0.05) == schedule.first_tokens  # no round decodes within 50 ms
