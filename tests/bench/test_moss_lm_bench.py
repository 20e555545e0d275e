"""bench/moss_lm_bench.py on the tiny sizes: every measurement is present and consistent."""

from __future__ import annotations

import json

import pytest

from bench.moss_lm_bench import main


@pytest.mark.usefixtures("one_torch_thread")
def test_tiny_run_reports_every_measurement(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--tiny", "--frames", "3", "--concurrency", "1,3", "--repeats", "1", "--prefill-rows", "40"]
    main([*args, "--dtype", "float32"])  # float32 on every machine (auto is bf16 with bf16 instructions)
    report = json.loads(capsys.readouterr().out)
    for split, streams in zip(report["split"], (1, 3), strict=True):
        assert split["streams"] == streams and split["prefill_rows"] == 40
        assert split["step_ms"] == pytest.approx(
            split["backbone_ms"] + split["local_ms"] + split["sampling_ms"]
        )
        assert split["frames_per_s"] == pytest.approx(streams * 1e3 / split["step_ms"])
    runs = {run["streams"]: run for run in report["engine"]}
    assert runs[1]["frames"] == 3 and runs[3]["frames"] == 9
    assert all(run["frames_per_s"] > 0 and run["first_frame_ms_median"] > 0 for run in runs.values())
    compare = report["attention_compare"]
    assert compare["max_abs_logit_diff"] < 1e-4  # sdpa and eager compute the same logits in float32
    assert {"sdpa", "eager"} <= compare.keys()
