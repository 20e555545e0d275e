"""bench/lm_cache_bench.py on the small shape: both cache kinds measured at each length, same logits."""

from __future__ import annotations

import json

import pytest

from bench.lm_cache_bench import main


@pytest.mark.usefixtures("one_torch_thread")
def test_small_run_measures_both_caches_at_each_length(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--shape", "small", "--rows", "2", "--lengths", "20,300", "--steps", "1", "--dtype", "float32"])
    report = json.loads(capsys.readouterr().out)
    assert [run["length"] for run in report["runs"]] == [20, 300]
    for run in report["runs"]:
        assert run["dynamic_step_ms"] > 0 and run["growing_step_ms"] > 0
        assert run["speedup"] == pytest.approx(run["dynamic_step_ms"] / run["growing_step_ms"], abs=0.01)
        assert run["max_abs_logit_diff"] < 1e-4  # the same model outputs from either cache
