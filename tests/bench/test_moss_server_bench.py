"""bench/moss_server_bench.py on the tiny sizes: requests go over HTTP to the server, both configurations
run, and every figure is there."""

from __future__ import annotations

import json

import pytest

from bench.moss_server_bench import main


@pytest.mark.usefixtures("one_torch_thread")
def test_tiny_run_reports_first_audio_and_throughput_for_both_configs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["--tiny", "--frames", "5", "--concurrency", "1,2", "--prefill-rows", "40", "--first-repeats", "2"])
    report = json.loads(capsys.readouterr().out)
    assert report["prompt_rows"] == 40 and report["frames_per_request"] == 5
    configs = {c["config"]: c for c in report["configs"]}
    assert set(configs) == {"previous", "current"}
    previous, current = configs["previous"], configs["current"]
    assert (previous["MOSS_LM_DTYPE"], previous["MOSS_FIRST_CHUNK_FRAMES"]) == ("float32", 2)
    assert (current["MOSS_LM_DTYPE"], current["MOSS_FIRST_CHUNK_FRAMES"]) == ("auto", 1)
    assert previous["lm"]["dtype"] == previous["codec"]["decoder"]["dtype"] == "float32"
    assert current["lm"]["reason"].startswith("auto:")  # what /ready said the server chose
    for config in configs.values():
        assert len(config["first_audio_alone_s"]) == 2 and config["first_audio_alone_s_median"] > 0
        runs = {run["streams"]: run for run in config["runs"]}
        assert set(runs) == {1, 2} and runs[1]["vs_one_request"] == 1.0
        for n, run in runs.items():
            assert run["audio_s"] == pytest.approx(5 * 0.08 * n)  # every frame became 80 ms of audio
            assert run["audio_s_per_wall_s"] == pytest.approx(run["audio_s"] / run["wall_s"])
            for request in run["requests"]:
                assert 0 < request["first_audio_s"] <= request["total_s"] <= run["wall_s"]
