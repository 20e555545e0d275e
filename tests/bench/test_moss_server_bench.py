"""bench/moss_server_bench.py on the tiny sizes: requests go through the service and every figure is there."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import torch

from bench.moss_server_bench import main


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    saved = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny ops: a loaded CPU's OpenMP pool only adds waits
    yield
    torch.set_num_threads(saved)


@pytest.mark.usefixtures("one_torch_thread")
def test_tiny_run_reports_first_audio_and_rtf(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--tiny", "--frames", "5", "--concurrency", "1,2", "--prefill-rows", "40"])
    report = json.loads(capsys.readouterr().out)
    runs = {run["streams"]: run for run in report["runs"]}
    assert set(runs) == {1, 2}
    for n, run in runs.items():
        assert run["frames"] == 5 * n and run["prompt_rows"] == 40
        for request in run["requests"]:
            assert request["audio_s"] == pytest.approx(5 * 0.08)  # every frame became 80 ms of audio
            assert 0 < request["first_pcm_s"] <= request["first_byte_s"] <= request["total_s"]
            assert request["rtf"] == pytest.approx(request["total_s"] / request["audio_s"])
