"""bench/moss_codec_bench.py on the tiny codec: every measurement is present and consistent."""

from __future__ import annotations

import json

import pytest

from bench.moss_codec_bench import main


@pytest.mark.usefixtures("one_torch_thread")
def test_tiny_run_reports_every_measurement(capsys: pytest.CaptureFixture[str]) -> None:
    main(
        [
            "--tiny",
            "--streams",
            "1,3",
            "--seconds",
            "0.5",
            "--repeats",
            "1",
            "--encode-s",
            "1",
            "--snr-frames",
            "4",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    rows = {(row["variant"], row["streams"]): row for row in report["decode"]}
    assert set(rows) == {
        ("one_at_a_time", 1),
        ("one_at_a_time", 3),
        ("batched", 3),
        ("lockstep_one_at_a_time", 3),
        ("lockstep_batched", 3),
    }
    assert rows[("one_at_a_time", 3)]["batch_sizes"] == {"1": 3 * 2}  # 6 frames in 3-frame chunks, 3 streams
    for row in rows.values():
        assert row["audio_s"] == pytest.approx(row["streams"] * 6 * 0.08)
        assert row["audio_s_per_s"] > 0
    assert set(report["first_chunk_s"]) == {"1_frame", "3_frame"}
    assert report["encode"]["clip_s"] == 1.0 and report["encode"]["median_s"] > 0
    assert report["state_mb_per_stream"] == pytest.approx(1.0, abs=0.1)
    assert report["bf16"]["snr_db"] > 20
