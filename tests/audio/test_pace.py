"""Pace: units a second since the first arrival, parked time left out."""

from __future__ import annotations

import pytest

from app.audio.pace import Pace


def test_the_rate_counts_what_came_after_the_first_arrival() -> None:
    pace = Pace()
    assert pace.rate is None
    pace.arrived(5, now=10.0)
    assert pace.rate is None  # one arrival: no time has passed
    pace.arrived(1, now=10.1)
    pace.arrived(1, now=10.2)
    assert pace.rate == pytest.approx(10.0) and pace.units == 7 and pace.last_at == 10.2


def test_time_parked_for_input_is_left_out() -> None:
    pace = Pace()
    pace.arrived(1, now=0.0, parked_s=0.5)  # parked before the first arrival: not in the span
    pace.arrived(1, now=0.1, parked_s=0.5)
    pace.arrived(1, now=1.2, parked_s=1.5)  # 1 s of the 1.1 s gap was a wait for input
    assert pace.rate == pytest.approx(2 / 0.2)
