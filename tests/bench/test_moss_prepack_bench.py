"""bench/moss_prepack_bench.py on the tiny MOSS LM and codec: both parts, plain against prepacked."""

from __future__ import annotations

import json

import pytest

from bench.moss_prepack_bench import CODEC_CASES, main


@pytest.mark.usefixtures("one_torch_thread")
def test_tiny_run_times_both_parts_plain_against_prepacked(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--tiny", "--frames", "3", "--concurrency", "1,2", "--repeats", "1", "--dtype", "float32"])
    report = json.loads(capsys.readouterr().out)
    lm, codec = report["lm"], report["codec"]
    assert lm["layers_prepacked"] > 0 and lm["layers_plain"] == 0 and lm["first_frame_codes_equal"]
    assert lm["first_frame_logits_relative_error"] < 1e-5
    assert [row["streams"] for row in lm["results"]] == [1, 2]
    assert all(row["plain_step_ms"] > 0 and row["prepacked_step_ms"] > 0 for row in lm["results"])
    assert codec["layers_prepacked"] > 0 and [row["case"] for row in codec["results"]] == list(CODEC_CASES)
    assert all(row["audio_relative_error"] < 1e-5 for row in codec["results"])
