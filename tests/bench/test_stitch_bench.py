"""bench/stitch_bench.py on the tiny codec: the measurements it reports are present and consistent."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import torch

from app.audio.stitcher import StitchSchedule
from bench.stitch_bench import BUCKETS, DEFAULT, main


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    saved = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny ops: a loaded CPU's OpenMP pool only adds waits
    yield
    torch.set_num_threads(saved)


def test_tiny_run_reports_seam_quality_and_decode_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    main(
        [
            "--seconds",
            "3,5",
            "--repeats",
            "1",
            "--schedules",
            "default,fixed_1.5s_no_context",
            "--schedule",
            "mine=2,0.2,2,10,0.3,100",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    results = report["schedules"]
    assert list(results) == ["default", "fixed_1.5s_no_context", "mine"]
    assert results["mine"]["seconds"] == [2.0, 0.2, 2.0, 10.0, 0.3, 100.0, 0.0]
    default = results["default"]
    assert [row["seconds"] for row in default["utterances"]] == [3.0, 5.0]
    schedule = StitchSchedule.from_seconds(*DEFAULT[:6], buckets=BUCKETS, redecode_budget=DEFAULT[6])
    for row in default["utterances"]:  # what the stitcher decoded is what the schedule plans
        n = round(row["seconds"] * 50)
        planned = sum(stop - lo for _, _, lo, stop in schedule.plan(n)) / n
        assert row["decoded_per_emitted"] == pytest.approx(planned)
        # the 0.2 s first window's contexts pass 1.2 below 5 s (3 s: 1.3); first, second, last window
        assert row["decoded_per_emitted"] <= (1.2 if n >= 250 else 1.3)
        assert row["windows"] == len(schedule.plan(n)) == 3
        assert 0 < row["seam_snr_db"] < 100 and 0 < row["body_snr_db"] < 100
    assert default["decoded_per_emitted"]["buckets"] == {"3s": 1.267, "5s": 1.2, "10s": 1.192, "20s": 1.2}
    # hard cuts without context: every sample decoded once, and the joins are far off the one-shot decode
    baseline = results["fixed_1.5s_no_context"]
    assert baseline["decoded_per_emitted_max"] == 1.0
    assert baseline["seam_snr_db_median"] < default["seam_snr_db_median"] - 5
