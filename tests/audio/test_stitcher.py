"""Stitcher: window schedule, sample bookkeeping, chunking independence and crossfade behaviour."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from app.audio.round_cost import RoundCost
from app.audio.stitcher import LAST_WINDOW_SLACK, Stitcher, StitchSchedule
from tests.conftest import make_settings

SPT = 480

BUCKETS = (64, 96, 128, 192, 256, 384, 512, 768, 1024)
DEFAULT = StitchSchedule.from_seconds(2.0, 0.2, 2.0, 10.0, 3.0, 12.0)
LOW_LATENCY = StitchSchedule.from_seconds(0.5, 0.2, 2.0, 10.0, 3.0, 12.0)
SCHEDULES = {
    "default": DEFAULT,
    "low_latency": LOW_LATENCY,
    "small": StitchSchedule(4, 2.0, 10, 2, 3, 288),
    "no_future": StitchSchedule(5, 1.5, 12, 0, 4, 288),
    "no_context": StitchSchedule(3, 2.0, 9, 0, 0, 288),
    "fixed_windows": StitchSchedule(7, 1.0, 7, 1, 2, 100),
    "no_crossfade": StitchSchedule(6, 2.0, 20, 2, 2, 0),
    "wide_crossfade": StitchSchedule(2, 3.0, 30, 1, 1, 5000),
    "one_token": StitchSchedule(1, 1.0, 1, 0, 1, 288),
    "bucketed": StitchSchedule.from_seconds(2.0, 0.2, 2.0, 10.0, 3.0, 12.0, buckets=BUCKETS),
    "bucketed_small": StitchSchedule(4, 2.0, 10, 2, 3, 288, buckets=(4, 8, 12, 20)),
    "bucketed_no_future": StitchSchedule(5, 1.5, 12, 0, 4, 288, buckets=(3, 6, 9, 16)),
    "budgeted": StitchSchedule.from_seconds(
        2.0, 0.2, 2.0, 10.0, 0.3, 100.0, buckets=BUCKETS, redecode_budget=0.2
    ),
    "budgeted_small": StitchSchedule(4, 2.0, 10, 2, 1, 288, redecode_budget=0.5),
    # the server's 0.2 s first window under a slow codec's load: 15 codes first, then as the rounds allow
    "loaded": StitchSchedule.from_seconds(
        0.2,
        0.2,
        6.0,
        15.0,
        0.3,
        100.0,
        buckets=(20, 64, 96, 128, 192, 256, 384, 512, 768),
        redecode_budget=0.2,
    ).for_load(RoundCost(0.15, 0.001, 1, 1.0)),
    # buckets leave later windows 1 code of their own (15 past + 1 in 16): the joins must fit in them
    "bucketed_shrinking": StitchSchedule(1, 1.0, 10, 0, 15, 2400, buckets=(16, 24, 32, 48, 64)),
}


class FakeDecoder:
    """Records the windows it is asked to decode. ``context=False``: each code c is a constant block of
    c / 1000 (purely local). ``context=True``: a continuous line through the code values plus an offset
    that depends on the whole window (like GroupNorm), so windows disagree at their joins."""

    def __init__(self, context: bool, spt: int = SPT) -> None:
        self.context = context
        self.spt = spt
        self.calls: list[list[int]] = []
        self.deadlines: list[float | None] = []

    async def __call__(self, codes: list[int], deadline: float | None = None) -> np.ndarray:
        self.deadlines.append(deadline)
        self.calls.append(list(codes))
        return self.decode_now(codes)

    def decode_now(self, codes: list[int]) -> np.ndarray:
        v = np.asarray(codes, dtype=np.float64) / 1000
        if not self.context:
            return np.repeat(v, self.spt).astype(np.float32)
        centres = (np.arange(len(v)) + 0.5) * self.spt
        line = np.interp(np.arange(len(v) * self.spt), centres, v)
        return (line + 2 * (v.mean() - 0.5)).astype(np.float32)


def random_codes(n: int, seed: int = 0) -> list[int]:
    return np.random.default_rng(seed).integers(0, 1000, n).tolist()


async def stitch(
    schedule: StitchSchedule, codes: list[int], sizes: list[int], decoder: FakeDecoder
) -> list[np.ndarray]:
    """Push ``codes`` in pieces of ``sizes`` (the rest in one piece), then flush; return all chunks."""
    stitcher = Stitcher(decoder, schedule)
    chunks: list[np.ndarray] = []
    pos = 0
    for size in [*sizes, len(codes)]:
        chunks += await stitcher.push(codes[pos : pos + size])
        pos += size
    chunks += await stitcher.flush()
    return chunks


def joined(chunks: list[np.ndarray]) -> np.ndarray:
    for chunk in chunks:
        assert chunk.dtype == np.float32 and chunk.ndim == 1 and chunk.size > 0
    return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)


def random_sizes(rng: random.Random, n: int) -> list[int]:
    sizes = []
    while sum(sizes) < n:
        sizes.append(rng.choice([0, 1, 1, 2, 3, 7, 50, 200]))
    return sizes


# --- schedule ---------------------------------------------------------------------------------


def test_from_seconds_defaults() -> None:
    assert StitchSchedule(100, 2.0, 500, 10, 150, 288, 480) == DEFAULT
    assert LOW_LATENCY.first_tokens == 25
    assert [e - s for s, e in DEFAULT.windows(2000)] == [100, 200, 400, 500, 500, 300]
    assert (DEFAULT.crossfade_left, DEFAULT.crossfade_right) == (144, 144)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((0.001, 0.0, 1.0, 1.0, 0.0, 0.0), StitchSchedule(1, 1.0, 50, 0, 0, 0)),  # first is at least 1
        ((2.0, 0.2, 1.5, 1.0, 0.5, 5.0), StitchSchedule(100, 1.5, 100, 10, 25, 120)),  # max >= first
        (
            (0.75, 0.1, 2.0, 10.0, 3.0, 12.0, 25, 16000),
            StitchSchedule(19, 2.0, 250, 2, 75, 192, 640, tokens_per_s=25),
        ),
    ],
)
def test_from_seconds_rounding(args: tuple, expected: StitchSchedule) -> None:
    assert StitchSchedule.from_seconds(*args) == expected


@pytest.mark.parametrize(
    "args",
    [
        (0.0, 0.2, 2.0, 10.0, 3.0, 12.0),
        (-1.0, 0.2, 2.0, 10.0, 3.0, 12.0),
        (float("nan"), 0.2, 2.0, 10.0, 3.0, 12.0),
        (float("inf"), 0.2, 2.0, 10.0, 3.0, 12.0),
        (2.0, -0.1, 2.0, 10.0, 3.0, 12.0),
        (2.0, 0.2, 0.5, 10.0, 3.0, 12.0),
        (2.0, 0.2, float("inf"), 10.0, 3.0, 12.0),
        (2.0, 0.2, 2.0, 0.0, 3.0, 12.0),
        (2.0, 0.2, 2.0, 10.0, -3.0, 12.0),
        (2.0, 0.2, 2.0, 10.0, 3.0, -1.0),
        (2.0, 0.2, 2.0, 10.0, 3.0, 12.0, 50, 24001),
        (2.0, 0.2, 2.0, 10.0, 3.0, 12.0, 0, 24000),
    ],
)
def test_from_seconds_rejects_nonsense(args: tuple) -> None:
    with pytest.raises(ValueError):
        StitchSchedule.from_seconds(*args)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"first_tokens": 0},
        {"first_tokens": 2.5},
        {"first_tokens": True},
        {"max_window_tokens": 3},
        {"future_tokens": -1},
        {"past_tokens": -1},
        {"crossfade_samples": -1},
        {"samples_per_token": 0},
        {"growth": 0.9},
        {"growth": float("nan")},
    ],
)
def test_schedule_rejects_nonsense(kwargs: dict) -> None:
    base = {"first_tokens": 4, "growth": 2.0, "max_window_tokens": 10, "future_tokens": 2}
    with pytest.raises(ValueError):
        StitchSchedule(**{**base, "past_tokens": 3, "crossfade_samples": 288, **kwargs})


@pytest.mark.parametrize(
    ("schedule", "left", "right"),
    [
        (StitchSchedule(4, 2.0, 10, 2, 3, 288), 144, 144),  # centred
        (StitchSchedule(4, 2.0, 10, 2, 3, 289), 144, 145),
        (StitchSchedule(4, 2.0, 10, 0, 3, 288), 288, 0),  # no future: all left of the boundary
        (StitchSchedule(8, 2.0, 10, 1, 4, 2000), 1520, 480),  # right half limited by the future context
        (StitchSchedule(8, 2.0, 10, 1, 1, 2000), 480, 480),  # left half limited by the past context
        (StitchSchedule(4, 2.0, 10, 0, 0, 288), 0, 0),  # no context: a hard cut
        (StitchSchedule(2, 2.0, 10, 5, 5, 5000), 480, 480),  # never wider than the first window
        # never wider than the shortest window: the first owns 16 codes, the later ones 1
        (StitchSchedule(1, 1.0, 10, 0, 15, 2400, buckets=(16, 24, 32, 48, 64)), 480, 0),
    ],
)
def test_crossfade_halves(schedule: StitchSchedule, left: int, right: int) -> None:
    assert (schedule.crossfade_left, schedule.crossfade_right) == (left, right)


def test_growth_products_stay_on_their_integer() -> None:
    schedule = StitchSchedule(10, 1.1, 100, 0, 0, 0)
    assert [e - s for s, e in schedule.windows(150)][:5] == [10, 11, 12, 13, 14]


# --- stitcher ---------------------------------------------------------------------------------


async def test_decode_windows_and_emit_times() -> None:
    """first 4, growth 2, max 10, future 2, past 3: windows [0,4) [4,12) [12,22) and flush [22,30)."""
    schedule = StitchSchedule(4, 2.0, 10, 2, 3, 288)
    codes = list(range(100, 130))
    decoder = FakeDecoder(context=False)
    stitcher = Stitcher(decoder, schedule)
    emitted_at: dict[int, list[int]] = {}
    for i, code in enumerate(codes):
        chunks = await stitcher.push([code])
        if chunks:
            emitted_at[i + 1] = [len(c) for c in chunks]
    assert emitted_at == {6: [4 * SPT - 144], 14: [8 * SPT], 24: [10 * SPT]}
    final = await stitcher.flush()
    assert [len(c) for c in final] == [8 * SPT + 144]
    assert decoder.calls == [codes[0:6], codes[1:14], codes[9:24], codes[19:30]]
    assert schedule.windows(30) == [(0, 4), (4, 12), (12, 22), (22, 30)]


async def test_first_chunk_after_first_plus_future_codes() -> None:
    stitcher = Stitcher(FakeDecoder(context=True), DEFAULT)
    codes = random_codes(300)
    assert await stitcher.push(codes[:109]) == []
    chunks = await stitcher.push(codes[109:110])
    assert [len(c) for c in chunks] == [100 * SPT - 144]


@pytest.mark.parametrize("name", SCHEDULES)
async def test_decode_calls_follow_windows(name: str) -> None:
    schedule = SCHEDULES[name]
    codes = random_codes(1234 if schedule.first_tokens > 1 else 300)
    decoder = FakeDecoder(context=False)
    await stitch(schedule, codes, [1] * 40 + [333], decoder)
    expected = [codes[lo:stop] for _, _, lo, stop in schedule.plan(len(codes))]
    assert decoder.calls == expected
    for i, (s, e, lo, stop) in enumerate(schedule.plan(len(codes))):
        assert lo <= max(0, s - schedule.past_tokens) and s < e <= stop  # at least the past context
        if i < len(schedule.windows(len(codes))) - 1:
            assert stop == e + schedule.future_tokens


@pytest.mark.parametrize("name", SCHEDULES)
async def test_total_length_for_any_count(name: str) -> None:
    schedule = SCHEDULES[name]
    first, future = schedule.first_tokens, schedule.future_tokens
    counts = {0, 1, max(first - 1, 0), first, first + future, first + future + 1, 3 * first + 7, 777}
    for n in sorted(counts):
        decoder = FakeDecoder(context=True)
        out = joined(await stitch(schedule, random_codes(n, seed=n), [], decoder))
        assert out.shape == (n * SPT,), (name, n)
        assert (len(decoder.calls) == 0) == (n == 0)


@pytest.mark.parametrize("name", SCHEDULES)
async def test_local_decoder_gives_the_one_shot_decode_exactly(name: str) -> None:
    schedule = SCHEDULES[name]
    decoder = FakeDecoder(context=False)
    for n in (0, 1, schedule.first_tokens, 55, 640):
        codes = random_codes(n, seed=n + 1)
        out = joined(await stitch(schedule, codes, [3, 1], decoder))
        np.testing.assert_array_equal(out, decoder.decode_now(codes))


@pytest.mark.parametrize("name", SCHEDULES)
async def test_output_does_not_depend_on_chunking(name: str) -> None:
    schedule = SCHEDULES[name]
    rng = random.Random(1234)
    for trial in range(6):
        n = rng.choice([0, 1, schedule.first_tokens + schedule.future_tokens, rng.randrange(1, 900)])
        codes = random_codes(n, seed=trial)
        reference = joined(await stitch(schedule, codes, [], FakeDecoder(context=True)))
        one_by_one = joined(await stitch(schedule, codes, [1] * n, FakeDecoder(context=True)))
        np.testing.assert_array_equal(one_by_one, reference)
        for _ in range(4):
            sizes = random_sizes(rng, n)
            out = joined(await stitch(schedule, codes, sizes, FakeDecoder(context=True)))
            np.testing.assert_array_equal(out, reference)


async def test_joins_are_continuous_with_a_context_dependent_decoder() -> None:
    """Windows disagree by a per-window offset; the crossfade spreads each step over L + R samples."""
    codes = random_codes(1500, seed=7)
    decoder = FakeDecoder(context=True)
    smooth_step = np.abs(np.diff(decoder.decode_now(codes))).max()  # the one-shot signal's largest step
    schedule = StitchSchedule(20, 1.5, 200, 5, 30, 288)
    out = joined(await stitch(schedule, codes, [], decoder))
    hard = joined(await stitch(StitchSchedule(20, 1.5, 200, 5, 30, 0), codes, [], FakeDecoder(True)))

    width = schedule.crossfade_left + schedule.crossfade_right
    offsets = [2 * (np.mean(c) / 1000 - 0.5) for c in decoder.calls]
    largest_jump = np.abs(np.diff(offsets)).max()
    bound = smooth_step + largest_jump * np.pi / (2 * width) + 1e-6
    assert np.abs(np.diff(out)).max() <= bound
    assert np.abs(np.diff(hard)).max() > 5 * bound  # without the crossfade the joins do jump


async def test_crossfade_blends_the_two_windows_with_a_raised_cosine() -> None:
    """Window 0 decodes to 0.0 everywhere, later windows to 1.0: the join is the ramp itself."""
    calls: list[list[int]] = []

    async def decode(codes: list[int], deadline: float | None = None) -> np.ndarray:
        calls.append(codes)
        return np.full(len(codes) * SPT, float(len(calls) > 1), np.float32)

    schedule = StitchSchedule(2, 1.0, 2, 1, 1, 100)  # L = R = 50
    stitcher = Stitcher(decode, schedule)
    out = joined([*await stitcher.push([0, 0, 1, 1, 1, 1]), *await stitcher.flush()])
    join = out[2 * SPT - 50 : 2 * SPT + 50]
    t = (np.arange(100) + 0.5) / 100
    np.testing.assert_allclose(join, 0.5 * (1 - np.cos(np.pi * t)), atol=1e-6)
    assert (out[: 2 * SPT - 50] == 0).all() and (out[2 * SPT + 50 :] == 1).all()


async def test_wrong_decoder_output_is_an_error() -> None:
    async def decode(codes: list[int], deadline: float | None = None) -> np.ndarray:
        return np.zeros(len(codes) * SPT - 1, np.float32)

    stitcher = Stitcher(decode, StitchSchedule(2, 1.0, 2, 0, 0, 0))
    with pytest.raises(ValueError, match="returned shape"):
        await stitcher.push([1, 2])


async def test_flush_ends_the_stream() -> None:
    decoder = FakeDecoder(context=False)
    stitcher = Stitcher(decoder, StitchSchedule(3, 1.0, 3, 0, 1, 100))
    chunks = await stitcher.push([1, 2, 3, 4, 5, 6])  # two full windows; the second holds 100 samples
    tail = await stitcher.flush()  # nothing left to decode: the held samples come out as they are
    assert [len(c) for c in [*chunks, *tail]] == [3 * SPT - 100, 3 * SPT, 100]
    assert len(decoder.calls) == 2
    assert await stitcher.flush() == []
    with pytest.raises(RuntimeError):
        await stitcher.push([7])


@pytest.mark.parametrize("n", [0, 1, 63, 64, 100, 130, 257, 700, 1234, 5000])
def test_bucketed_decode_lengths_come_from_the_buckets(n: int) -> None:
    schedule = SCHEDULES["bucketed"]
    plan = schedule.plan(n)
    for start, end, lo, stop in plan[:-1]:
        assert stop - lo in BUCKETS and end > start
    if plan:
        start, end, lo, stop = plan[-1]
        need = end - max(0, start - schedule.past_tokens)
        fits = [b for b in BUCKETS if need <= b <= min(n, need * (1 + LAST_WINDOW_SLACK))]
        assert stop - lo == (fits[0] if fits else need)  # the smallest bucket within the slack, or natural
    assert [e for _, e, _, _ in plan][-1:] == ([n] if n else [])


def test_bucketed_schedule_rounds_to_the_nearest_bucket() -> None:
    schedule = SCHEDULES["bucketed"]  # first 100, future 10, past 150, growth 2, max 500
    assert [(lo, stop) for _, _, lo, stop in schedule.plan(2000)[:4]] == [
        (0, 96),  # 0 + 100 + 10 = 110 -> 96 (nearer than 128)
        (0, 256),  # past 86 + 200 + 10 = 296 -> 256
        (96, 608),  # past 150 + 400 + 10 = 560 -> 512
        (448, 1216),  # past 150 + 500 + 10 = 660 -> 768
    ]
    assert schedule.first_own == 86


@pytest.mark.parametrize("buckets", [(0, 5), (5, 3), (4, 4), (2.5,)])
def test_bad_buckets_are_rejected(buckets: tuple) -> None:
    with pytest.raises(ValueError, match="buckets"):
        StitchSchedule(4, 2.0, 10, 2, 3, 288, buckets=buckets)


# --- play-out deadlines, chunks as they are decoded, re-decoded codes --------------------------------


async def test_each_decode_gets_the_time_the_listener_runs_out_of_audio() -> None:
    now = [100.0]
    decoder = FakeDecoder(context=False)
    schedule = StitchSchedule(4, 1.0, 4, 1, 2, 0)  # windows of 4 codes, 1 future, 2 past, no crossfade
    stitcher = Stitcher(decoder, schedule, clock=lambda: now[0], sample_rate=SPT * 50)
    assert await stitcher.push([1] * 5)  # window 0 needs 4 + 1 codes
    now[0] = 100.5  # half a second later the next window is decodable
    await stitcher.push([1] * 4)
    await stitcher.flush()
    # the first window is due now (None); the clock started when its 4 codes (80 ms) came out. The
    # second came out at 100.5, after the listener had run dry at 100.08: it plays from 100.5 on
    assert decoder.deadlines == [None, pytest.approx(100.0 + 4 / 50), pytest.approx(100.5 + 4 / 50)]
    assert stitcher.stall_s == pytest.approx(0.5 - 4 / 50)


async def test_feed_yields_the_first_chunk_before_the_next_window_is_decoded() -> None:
    decoder = FakeDecoder(context=False)
    stitcher = Stitcher(decoder, StitchSchedule(4, 1.0, 4, 1, 2, 0))
    chunks = stitcher.feed(list(range(1, 30)))  # many windows' worth at once, as an instant LM sends
    first = await anext(chunks)
    assert first.size == 4 * SPT and len(decoder.calls) == 1  # window 1 not decoded yet
    rest = [chunk async for chunk in chunks]
    assert len(rest) == 6 and len(decoder.calls) == 7  # windows end at 4, 8, ..., 28 (+1 future)


def decoded(schedule: StitchSchedule, n: int) -> int:
    """Codes the schedule decodes for an utterance of ``n`` codes."""
    return sum(stop - lo for _, _, lo, stop in schedule.plan(n))


def test_the_budget_gives_the_last_window_what_the_utterance_leaves() -> None:
    """first 10, growth 2, max 40, future 2, past 3, budget 0.5; 40 codes: windows [0,10) decoding
    [0,12) and [10,30) decoding [7,32), 37 codes; the last owns [30,40): 10 + 3 past = 13 codes, and the
    budget allows 40 * 1.5 - 37 = 23, so it decodes [17,40)."""
    schedule = StitchSchedule(10, 2.0, 40, 2, 3, 0, redecode_budget=0.5)
    assert schedule.plan(40) == [(0, 10, 0, 12), (10, 30, 7, 32), (30, 40, 17, 40)]
    no_budget = StitchSchedule(10, 2.0, 40, 2, 3, 0)
    assert no_budget.plan(40)[-1] == (30, 40, 27, 40)
    # 400 codes: the budget (600 - what 11 windows decoded) would take the last window far back; it
    # stops at a full window's decode, 40 + 3 + 2 codes
    _, _, lo, stop = schedule.plan(400)[-1]
    assert stop - lo == 45 and decoded(schedule, 400) < 1.5 * 400
    # 30 codes: the budget (45 - 12 = 33 codes) covers the whole utterance: the last window decodes from 0
    assert schedule.plan(30) == [(0, 10, 0, 12), (10, 30, 0, 30)]


@pytest.mark.parametrize("name", ["budgeted", "budgeted_small"])
def test_the_budget_only_adds_past_context_to_the_last_window(name: str) -> None:
    schedule = SCHEDULES[name]
    unbudgeted = StitchSchedule(**{**schedule.__dict__, "redecode_budget": 0.0})
    longest = schedule.max_window_tokens + schedule.past_tokens + schedule.future_tokens
    for n in range(0, 3000, 7):
        plan, plain = schedule.plan(n), unbudgeted.plan(n)
        assert plan[:-1] == plain[:-1] and schedule.windows(n) == unbudgeted.windows(n)
        if not plan:
            continue
        start, end, lo, stop = plan[-1]
        fixed = decoded(schedule, n) - (stop - lo) + n - start + min(start, schedule.past_tokens)
        # within the budget, or what the windows decode with the fixed contexts alone
        assert decoded(schedule, n) <= max(n * (1 + schedule.redecode_budget), fixed)
        assert lo <= start - min(start, schedule.past_tokens) and stop == end == n  # at least its past
        assert stop - lo <= max(longest, n - start + schedule.past_tokens)


def server_default_schedule(buckets: tuple[int, ...]) -> StitchSchedule:
    s = make_settings()
    return StitchSchedule.from_seconds(
        s.DEFAULT_PLAYBACK_SPEED,
        s.DEFAULT_PLAYBACK_OVERLAP_SPEED,
        s.STREAM_CHUNK_GROWTH,
        s.STREAM_MAX_CHUNK_S,
        s.STREAM_PAST_CONTEXT_S,
        s.CROSSFADE_MS,
        buckets=buckets,
        redecode_budget=s.STREAM_REDECODE_BUDGET,
    )


@pytest.mark.parametrize("buckets", [(), tuple(make_settings().CODEC_BUCKETS)], ids=["natural", "buckets"])
@pytest.mark.parametrize("seconds", [5, 10, 20])
def test_the_default_schedule_decodes_at_most_1_2_codes_per_code_emitted(
    buckets: tuple[int, ...], seconds: int
) -> None:
    n = seconds * 50
    assert decoded(server_default_schedule(buckets), n) <= 1.2 * n


@pytest.mark.parametrize("buckets", [(), tuple(make_settings().CODEC_BUCKETS)], ids=["natural", "buckets"])
def test_the_default_schedule_stays_within_1_2_from_5_s_on(buckets: tuple[int, ...]) -> None:
    """The first window is 10 codes (0.2 s), so the fixed contexts of the first two windows (10 future,
    then 10 future + up to 10 past) pass 1.2 below 5 s (at 3 s: 1.3); from 5 s on the budget holds."""
    schedule = server_default_schedule(buckets)
    assert all(decoded(schedule, n) <= 1.2 * n for n in range(250, 6000))
    assert decoded(schedule, 150) <= 1.3 * 150


def test_the_default_schedule_starts_small_and_grows() -> None:
    """The server's defaults on 500 codes with CODEC_BUCKETS: the first window owns 10 codes and decodes
    them with 10 of future context (the 20 bucket): first audio after 20 codes. The second is 10 past +
    60 + 10 future = 80 codes, the 64 bucket (a tie with 96 goes to the smaller; owns 44); the third 10
    past + 360 + 10 -> 384 (owns 364); the last owns 82 codes and spends what the budget leaves
    (600 - 468 = 132: the 128 bucket) on past context. The joins are 100 ms crossfades, 50 ms each side."""
    schedule = server_default_schedule(tuple(make_settings().CODEC_BUCKETS))
    assert schedule.first_tokens == 10 and schedule.future_tokens == 10 and schedule.past_tokens == 10
    assert schedule.plan(500) == [(0, 10, 0, 20), (10, 54, 0, 64), (54, 418, 44, 428), (418, 500, 372, 500)]
    assert (schedule.crossfade_left, schedule.crossfade_right) == (1200, 1200)


@pytest.mark.parametrize("buckets", [(), tuple(make_settings().CODEC_BUCKETS)], ids=["natural", "buckets"])
def test_a_loaded_codec_lengthens_the_first_window_and_bounds_the_growth(buckets: tuple[int, ...]) -> None:
    """Past 10, future 10 (context 20), 3 codes held back. One stream on a codec with 0.1 s fixed and
    1 ms a code, cover 1.2, room for a second window 1.5 times the first:
    F >= (1.2 (0.1 + 0.02) + 0.06) / (0.02 - 0.0018) = 11.2 codes, so 12, and windows keep their natural
    lengths (no buckets). It plays 9 codes, 0.18 s: the next round may take 0.15 s, 0.05 s of codes beyond
    the fixed cost: 50 - 20 = 30 own codes (2.5 times the first), below 6 x 12 = 72."""
    schedule = server_default_schedule(buckets)
    assert schedule.for_load(None) is schedule
    load = RoundCost(0.1, 0.001, 1, 1.2)
    slow = schedule.for_load(load)
    assert schedule.first_for(load) == 12 and slow.first_tokens == slow.first_own == 12
    assert slow.buckets == () and slow.plan(500)[:2] == [(0, 12, 0, 22), (12, 42, 2, 52)]
    assert slow.for_load(load) == slow
    assert schedule.for_load(RoundCost(0.01, 0.0001, 1, 1.2)) is schedule  # a fast codec: as planned
    # every later window is decoded while the one before plays, with the cover to spare
    for before, after in itertools.pairwise(slow.windows(3000)[:-1]):  # the last one is what remains
        plays = (before[1] - before[0] - slow.held_bound) / 50
        assert load.cover * load.seconds(after[1] - after[0] + 20) <= plays + 1e-9


def test_a_codec_that_cannot_keep_up_has_no_first_window() -> None:
    """Eight streams at 3 ms a code: 8 x 3 ms x 50 codes/s = 1.2 s of decoding per second of audio."""
    schedule = server_default_schedule(())
    assert schedule.first_for(RoundCost(0.01, 0.003, 8, 1.0)) is None
    assert schedule.for_load(RoundCost(0.01, 0.003, 8, 1.0)).first_tokens == schedule.max_window_tokens
    assert schedule.first_for(RoundCost(0.01, 0.003, 4, 1.0)) is not None
