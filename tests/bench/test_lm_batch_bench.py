"""bench/lm_batch_bench.py on the small shape: every engine, level and ratio is reported, consistently."""

from __future__ import annotations

import json

import pytest

from app.families.neucodec.lm import transformers_source
from bench.lm_batch_bench import main


@pytest.mark.usefixtures("one_torch_thread")
def test_small_run_reports_every_engine_and_level(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transformers_source, "load_lm", transformers_source.load_lm)  # the bench replaces it
    main(["--shape", "small", "--concurrency", "1,3", "--tokens", "4"])
    report = json.loads(capsys.readouterr().out)
    assert list(report["engines"]) == ["one-at-a-time", "batched", "batched-serial-prefill"]
    for rows in report["engines"].values():
        assert [row["requests"] for row in rows] == [1, 3]
        for row in rows:
            assert 0 < row["codes"] <= 4 * row["requests"]
            assert row["tokens_per_s"] == pytest.approx(row["codes"] / row["wall_s"], rel=0.01)
            assert 0 < row["ttft_median_s"] <= row["ttft_max_s"] <= row["wall_s"]
    one = report["engines"]["one-at-a-time"][0]
    for name in ("batched", "batched-serial-prefill"):
        for row in report["engines"][name]:
            ratio = report["vs_one_request"][name][str(row["requests"])]["aggregate"]
            assert ratio == pytest.approx(row["tokens_per_s"] / one["tokens_per_s"], abs=0.01)
