"""bench/moss_pace_sim.py: MOSS's chunking against an LM near real time on a simulated clock; the doubling
sizes leave the listener dry, deadline cuts keep it fed, and an LM at twice real time is not cut."""

from __future__ import annotations

import json

import pytest

from bench.moss_pace_sim import main, simulate


def test_cuts_keep_a_listener_fed_that_the_doubling_sizes_leave_dry() -> None:
    doubling = simulate(1.2, cuts=False, frames=40, fixed_s=0.02, per_frame_s=0.002)
    cut = simulate(1.2, cuts=True, frames=40, fixed_s=0.02, per_frame_s=0.002)
    assert doubling["stall_s"] > 0.2 and cut["stall_s"] < 0.05
    assert cut["decodes"] > doubling["decodes"]


def test_the_command_prints_both_settings(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--speeds", "1,3", "--frames", "20"])
    report = json.loads(capsys.readouterr().out)
    assert set(report["results"]) == {"1x", "3x"}
    fast = report["results"]["3x"]
    assert fast["cuts"] == fast["doubling"]  # twice real time or more: nothing to cut
