"""RoundCost: a codec round's time, how far a window may grow under it, the first window it needs."""

from __future__ import annotations

import math

import pytest

from app.audio.round_cost import GROWTH, RoundCost


def test_a_round_is_the_fixed_cost_and_every_streams_codes() -> None:
    assert RoundCost(0.02, 0.001, 4, 1.2).seconds(30) == pytest.approx(0.02 + 0.001 * 4 * 30)


@pytest.mark.parametrize(
    "fields",
    [
        (-0.01, 0.001, 1, 1.0),
        (0.01, -0.001, 1, 1.0),
        (0.01, 0.001, 0, 1.0),
        (0.01, 0.001, 1, 0.0),
        (math.nan, 0.001, 1, 1.0),
        (0.01, math.inf, 1, 1.0),
    ],
)
def test_nonsense_is_rejected(fields: tuple[float, float, int, float]) -> None:
    with pytest.raises(ValueError, match="bad round cost"):
        RoundCost(*fields)


def test_a_window_grows_as_far_as_its_round_fits_in_the_audio_before_it() -> None:
    """40 codes play 0.8 s; with cover 2 the round may take 0.4 s: 0.38 s of codes at 2 streams x 1 ms
    is 190 codes, 170 of them its own beside 20 of context."""
    load = RoundCost(0.02, 0.001, 2, 2.0)
    assert load.fit(40, 20, 50) == 170
    assert 2.0 * load.seconds(170 + 20) <= 40 / 50 < 2.0 * load.seconds(171 + 20)
    assert RoundCost(0.0, 0.0, 1, 1.0).fit(10, 20, 50) == 2**31  # a codec that costs nothing: no bound


def test_the_first_window_leaves_the_next_room_to_grow() -> None:
    """F is the fewest codes for which a window GROWTH times longer decodes while F plays."""
    load = RoundCost(0.014, 0.00115, 5, 1.2)
    first = load.first_window(20, 3, 50)
    assert first == 23
    for own in (first, first + 10):
        assert load.fit(own - 3, 20, 50) >= GROWTH * own - 1
    assert load.fit(first - 1 - 3, 20, 50) < GROWTH * (first - 1)


def test_no_first_window_where_the_codec_cannot_keep_the_streams_fed() -> None:
    """10 streams x 1.5 x 1.2 x 1.15 ms a code: 20.7 ms, more than the 20 ms a code plays; 8 streams fit,
    with a long first window."""
    assert RoundCost(0.014, 0.00115, 10, 1.2).first_window(20, 3, 50) is None
    assert RoundCost(0.014, 0.00115, 8, 1.2).first_window(20, 3, 50) == 87
    assert RoundCost(0.014, 0.00115, 1, 1.2).first_window(20, 3, 50) == 6


def test_the_slope_is_how_many_times_over_the_codec_keeps_the_streams_fed() -> None:
    """8 streams x 1.15 ms a code x 1.2 to spare: 11 ms of decoding per 20 ms code, 1.81 times over; each
    window may be that many times the one before, less a constant."""
    load = RoundCost(0.014, 0.00115, 8, 1.2)
    assert load.slope(50) == pytest.approx(1 / (50 * 1.2 * 0.00115 * 8))
    assert load.fit(200, 20, 50) - load.fit(100, 20, 50) == pytest.approx(100 * load.slope(50), abs=1)
    assert RoundCost(0.0, 0.0, 4, 1.2).slope(50) == math.inf
