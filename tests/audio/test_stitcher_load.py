"""Stitcher under the codec's load: windows sized by the load as each one is considered, the first one
included until it is decoded; a steady load gives the fitted schedule in any chunking; cuts come as early
as their round needs."""

from __future__ import annotations

import random

import numpy as np
import pytest

from app.audio.round_cost import RoundCost
from app.audio.stitcher import DeadlineCuts, Stitcher, StitchSchedule
from tests.audio.test_stitcher import SPT, FakeDecoder, joined, random_codes, random_sizes

# first 10, growth 6, max 200, future 4, past 5, 48-sample crossfade
SCHEDULE = StitchSchedule(10, 6.0, 200, 4, 5, 48)
SLOW = RoundCost(0.1, 0.004, 1, 1.2)  # first window 15: (1.2 (0.1 + 0.036) + 1/50) / (0.02 - 0.0072) = 14.3


async def run(load: RoundCost | None, codes: list[int], sizes: list[int]) -> tuple[np.ndarray, FakeDecoder]:
    decoder = FakeDecoder(context=True)
    stitcher = Stitcher(decoder, SCHEDULE, load=lambda: load)
    chunks, pos = [], 0
    for size in [*sizes, len(codes)]:
        chunks += await stitcher.push(codes[pos : pos + size])
        pos += size
    chunks += await stitcher.flush()
    return joined(chunks), decoder


@pytest.mark.parametrize("n", [1, 30, 57, 200, 611])
async def test_a_steady_load_gives_the_fitted_schedule_in_any_chunking(n: int) -> None:
    fitted = SCHEDULE.for_load(SLOW)
    # the second window plays while the first's 14 codes (0.28 s) play: a round of 0.28 / 1.2 s decodes 33
    # codes, 24 of them its own (not 6 x 15)
    assert fitted.first_tokens == 15 and fitted.windows(611)[1] == (15, 39)
    codes = random_codes(n)
    whole, decoder = await run(SLOW, codes, [])
    assert whole.size == n * SPT
    assert decoder.calls == [codes[lo:stop] for _, _, lo, stop in fitted.plan(n)]
    rng = random.Random(n)
    for _ in range(3):
        pieces, _ = await run(SLOW, codes, random_sizes(rng, n))
        np.testing.assert_array_equal(pieces, whole)


async def test_no_load_leaves_the_schedule_as_configured() -> None:
    codes = random_codes(300)
    _, decoder = await run(None, codes, [7] * 40)
    assert decoder.calls == [codes[lo:stop] for _, _, lo, stop in SCHEDULE.plan(300)]


async def test_the_first_window_is_sized_by_the_load_when_its_codes_are_there() -> None:
    """Light while the first codes come, then loaded: the first window waits for the loaded length (15
    own + 4 future); once decoded, a lighter load lets the next window grow as configured."""
    load: list[RoundCost | None] = [None]
    decoder = FakeDecoder(context=False)
    stitcher = Stitcher(decoder, SCHEDULE, load=lambda: load[0])
    codes = random_codes(400)
    assert await stitcher.push(codes[:12]) == []  # 10 + 4 future would be due at 14
    load[0] = SLOW
    assert await stitcher.push(codes[12:18]) == [] and not decoder.calls  # now due at 15 + 4
    first = await stitcher.push(codes[18:19])
    assert decoder.calls == [codes[:19]] and first
    load[0] = None  # the others left: the next window is 6 x 15 = 90 codes again
    await stitcher.push(codes[19:108])
    assert len(decoder.calls) == 1
    await stitcher.push(codes[108:109])
    assert decoder.calls[1] == codes[10:109]  # 5 past + [15, 105) + 4 future


async def test_under_a_load_a_cut_comes_as_early_as_its_round_needs() -> None:
    """With the load, the margin is at least its cover times the round of what a cut would decode now:
    1.2 x (0.1 + 0.004 x 25) = 0.24 s for a cut of 5 past + 16 own + 4 future."""
    cuts = DeadlineCuts(min_margin_s=0.01, margin_factor=0.0, min_cut_tokens=3, cut_growth=0.0)
    now = [0.0]
    decoder = FakeDecoder(context=False)
    stitcher = Stitcher(
        decoder, StitchSchedule(10, 6.0, 200, 4, 5, 48, cuts=cuts), clock=lambda: now[0], sample_rate=SPT * 50
    )
    loaded = Stitcher(
        FakeDecoder(context=False),
        StitchSchedule(10, 6.0, 200, 4, 5, 48, cuts=cuts),
        clock=lambda: now[0],
        sample_rate=SPT * 50,
        load=lambda: SLOW,
    )
    codes = random_codes(100)
    await stitcher.push(codes[:14])
    await loaded.push(codes[:19])  # its first window is 15 + 4
    assert stitcher.deadline() is not None and loaded.deadline() is not None
    await stitcher.push(codes[14:20])
    await loaded.push(codes[19:35])  # 35 - 4 future - 15: 16 own codes
    assert stitcher.cut_due_in() == pytest.approx(stitcher.deadline() - 0.01)
    assert loaded.cut_due_in() == pytest.approx(loaded.deadline() - 1.2 * (0.1 + 0.004 * 25))
