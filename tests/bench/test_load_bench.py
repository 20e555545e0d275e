"""bench/bench.py: percentiles on known data, a run against the demo stack, errors counted by kind."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bench.bench import BenchConfig, RequestResult, main, percentile, run_bench, speech_url, summarize, table
from bench.evalset import EVALSET
from tests.api.conftest import http_settings, serve
from tests.fakes.fake_vllm import FakeVLLM, Script, random_codes

MAX_TOKENS = 96


@pytest.fixture
async def paced_vllm() -> AsyncIterator[FakeVLLM]:
    """Random codes (12 per word, capped by max_tokens), 4 per event at 400 tokens/s per stream."""
    fake = FakeVLLM(Script(tokens_per_event=4, tokens_per_s=400))
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
async def demo_url(tiny_codec_dir: Path, paced_vllm: FakeVLLM) -> AsyncIterator[str]:
    # max_tokens=96 bounds each generation; a pace at which every eval sentence fits 96 codes keeps one
    # LM request per speech request (the fake speaks 12 codes a word, cut at 96)
    settings = http_settings(
        tiny_codec_dir, paced_vllm.url, REFERENCE_VOICES=False, LONG_INPUT_CHARS_PER_S=100
    )
    async with serve(settings) as url:
        yield url


def test_percentiles_are_numpy_linear_on_known_data() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)  # rank 0.95 x 3 = 2.85
    assert percentile([15.0, 20.0, 35.0, 40.0, 50.0], 40) == pytest.approx(29.0)  # rank 1.6
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_summary_uses_successes_and_counts_errors_by_kind() -> None:
    results = [
        RequestResult(True, latency_s=1.0, ttfb_s=0.2, audio_s=2.0, gaps_s=[0.1, 0.3]),
        RequestResult(True, latency_s=3.0, ttfb_s=0.4, audio_s=2.0, gaps_s=[0.5]),
        RequestResult(False, latency_s=0.01, error="http_503"),
        RequestResult(False, latency_s=9.0, error="timeout"),
        RequestResult(False, latency_s=0.02, error="http_503"),
    ]
    row = summarize(4, results, wall_s=4.0)
    assert (row["requests"], row["ok"], row["errors"]) == (5, 2, 3)
    assert row["errors_by_kind"] == {"http_503": 2, "timeout": 1}
    assert row["requests_per_s"] == 0.5 and row["audio_s_per_s"] == 1.0
    assert row["latency_s"] == {"p50": 2.0, "p95": 2.9, "p99": 2.98, "max": 3.0}
    assert row["ttfb_s"]["p50"] == pytest.approx(0.3)
    assert row["rtf"] == {"p50": 1.0, "p90": 1.4}  # RTFs 0.5 and 1.5
    assert row["chunk_gap_s"] == {"p99": pytest.approx(0.496), "max": 0.5}
    assert "http_503 x2" in table({"results": [row]})


def test_speech_url_accepts_a_base_or_v1_or_full_url() -> None:
    full = "http://h:1/v1/audio/speech"
    assert speech_url("http://h:1") == speech_url("http://h:1/v1/") == speech_url(full) == full


async def test_run_against_the_demo_stack_reports_sane_numbers(demo_url: str, paced_vllm: FakeVLLM) -> None:
    config = BenchConfig(
        url=demo_url, voices=("alloy", "nova"), levels=(1, 3), requests=6, warmup=1, max_tokens=MAX_TOKENS
    )
    report = await run_bench(config, "test", log=lambda _message: None)
    assert [row["concurrency"] for row in report["results"]] == [1, 3]
    counted = paced_vllm.requests[config.warmup :]
    assert len(counted) == 12
    assert {r.body["max_tokens"] for r in counted} == {MAX_TOKENS}
    voices = [r.body["prompt"].split(":", 1)[0] for r in counted[:2]]
    assert voices == ["<|im_start|>husein", "<|im_start|>idayu"]  # alloy, nova in turn
    for row, requests in zip(report["results"], (counted[:6], counted[6:]), strict=True):
        assert (row["requests"], row["ok"], row["errors"], row["errors_by_kind"]) == (6, 6, 0, {})
        # speed 1.0: exactly 480 samples (0.02 s) of audio per speech token the fake sent
        tokens = sum(len(random_codes(r.body["prompt"], MAX_TOKENS)) for r in requests)
        assert row["audio_s"] == pytest.approx(tokens / 50, abs=1e-3)
        assert row["audio_s_per_s"] == pytest.approx(row["audio_s"] / row["wall_s"], rel=0.01)
        assert row["requests_per_s"] == pytest.approx(6 / row["wall_s"], rel=0.01)
        for stats in (row["latency_s"], row["ttfb_s"]):
            assert 0 < stats["p50"] <= stats["p95"] <= stats["p99"] <= stats["max"] < 10
        assert row["ttfb_s"]["p50"] < row["latency_s"]["p50"]
        assert 0 < row["rtf"]["p50"] <= row["rtf"]["p90"] < 5
        assert row["chunk_gap_s"]["p99"] is not None
    assert report["percentile_method"].startswith("numpy linear")
    assert len(EVALSET) == 16


async def test_errors_are_counted_by_kind(demo_url: str, paced_vllm: FakeVLLM) -> None:
    base = BenchConfig(url=demo_url, levels=(2,), requests=4, warmup=0, max_tokens=MAX_TOKENS)

    async def kinds(**changes: object) -> dict[str, int]:
        config = BenchConfig(**(base.__dict__ | changes))
        report = await run_bench(config, log=lambda _message: None)
        return report["results"][0]["errors_by_kind"]

    assert await kinds(voices=("nobody",)) == {"http_400": 4}
    assert await kinds(model="whisper-1") == {"http_404": 4}
    assert await kinds(min_audio_s=1000.0) == {"short_body": 4}
    paced_vllm.script = Script(first_token_delay_s=1.0)
    assert await kinds(timeout_s=0.3) == {"timeout": 4}
    paced_vllm.script = Script(status=500)
    assert await kinds() == {"http_502": 4}


async def test_a_dead_server_counts_connection_errors() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the bench connects: refused
    config = BenchConfig(url=f"http://127.0.0.1:{port}", levels=(1,), requests=3, warmup=0)
    report = await run_bench(config, log=lambda _message: None)
    assert report["results"][0]["errors_by_kind"] == {"connection": 3}


def test_compare_prints_both_reports_and_ratios(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def report(label: str, audio_s_per_s: float) -> Path:
        ok = RequestResult(True, latency_s=1.0, ttfb_s=0.25, audio_s=audio_s_per_s)
        row = summarize(4, [ok], wall_s=1.0)
        path = tmp_path / f"{label}.json"
        path.write_text(json.dumps({"label": label, "started_at": "now", "results": [row]}))
        return path

    assert main(["--compare", str(report("before", 2.0)), str(report("after", 5.0))]) == 0
    out = capsys.readouterr().out
    assert "A: before" in out and "B: after" in out
    line = next(line for line in out.splitlines() if "audio s/s" in line)
    assert line.split() == ["4", "audio", "s/s", "2.000", "5.000", "2.50x"]
