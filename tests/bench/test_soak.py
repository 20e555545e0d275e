"""bench/soak.py: the request plan, body checks, /proc readings, and a tiny soak of the real demo stack."""

from __future__ import annotations

import os
import re
import socket
import sys
import tracemalloc
from pathlib import Path

import pytest

from bench.soak import (
    FORMATS,
    SoakConfig,
    allocation_growth,
    plan_requests,
    read_fd_kinds,
    read_proc,
    run_soak,
    table,
    well_formed,
)


def test_plan_mixes_formats_and_transports_and_drops_a_fixed_share() -> None:
    config = SoakConfig(requests=40, baseline_at=10, drop_fraction=0.3, seed=3)
    plans = plan_requests(config)
    assert [p.index for p in plans] == list(range(40))
    assert sum(p.drop for p in plans) == 12
    assert plan_requests(config) == plans  # the same seed drops the same requests
    assert [p.drop for p in plan_requests(SoakConfig(requests=40, baseline_at=10, seed=4))] != [
        p.drop for p in plans
    ]
    for fmt in FORMATS:
        assert sum(p.response_format == fmt and p.sse for p in plans) == 5
        assert sum(p.response_format == fmt and not p.sse for p in plans) == 5
    assert {p.voice for p in plans} == {"alloy", "nova"}
    with pytest.raises(ValueError, match="baseline_at"):
        SoakConfig(requests=10, baseline_at=10)


def test_bodies_are_checked_by_their_format() -> None:
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt "
    assert well_formed("wav", wav, 44) and not well_formed("wav", b"OggS" + wav[4:], 44)
    assert well_formed("pcm", b"\x00\x01", 4) and not well_formed("pcm", b"\x00", 3)
    assert well_formed("mp3", b"ID3\x04", 10) and well_formed("mp3", b"\xff\xfb\x90", 10)
    assert not well_formed("mp3", b"\x00\x00", 10)
    assert well_formed("opus", b"OggS\x00\x02" + b"\x00" * 22 + b"OpusHead", 40)
    assert not well_formed("opus", b"OggS\x00\x02" + b"\x00" * 22 + b"Vorbis", 40)
    assert not well_formed("pcm", b"", 0)


def test_proc_readings_count_this_process_sockets_by_kind() -> None:
    before = read_fd_kinds(os.getpid(), api_port=1, lm_port=2)
    with socket.create_server(("127.0.0.1", 0)) as api, socket.create_server(("127.0.0.1", 0)) as lm:
        api_port, lm_port = api.getsockname()[1], lm.getsockname()[1]
        with (
            socket.create_connection(("127.0.0.1", api_port)),
            socket.create_connection(("127.0.0.1", lm_port)),
        ):
            accepted_api, _ = api.accept()
            accepted_lm, _ = lm.accept()
            with accepted_api, accepted_lm:
                kinds = read_fd_kinds(os.getpid(), api_port, lm_port)
    # accepted on the api port: a client; connected to the lm port: the pool; the other two ends: other
    assert kinds["tcp_listen"] - before["tcp_listen"] == 2
    assert kinds["tcp_clients"] - before["tcp_clients"] == 1
    assert kinds["tcp_lm"] - before["tcp_lm"] == 1
    assert kinds["tcp_other"] - before["tcp_other"] == 2
    rss_kib, threads = read_proc(os.getpid())
    assert rss_kib > 1024 and threads >= 1


def test_allocation_growth_names_the_line_that_kept_memory(tmp_path: Path) -> None:
    was_tracing = tracemalloc.is_tracing()
    tracemalloc.start(4)
    try:
        tracemalloc.take_snapshot().dump(str(tmp_path / "before.tm"))
        kept = [bytearray(1000) for _ in range(200)]  # the line the diff must name
        line = sys._getframe().f_lineno - 1
        tracemalloc.take_snapshot().dump(str(tmp_path / "after.tm"))
    finally:
        if not was_tracing:
            tracemalloc.stop()
    growth = allocation_growth(tmp_path / "before.tm", tmp_path / "after.tm")
    top = growth["top_lines"][0]
    assert top["where"] == f"tests/bench/test_soak.py:{line}"
    assert top["count_diff"] >= 200 and top["size_diff_kib"] >= 200 * 1000 / 1024
    assert growth["traced_kib"][1] - growth["traced_kib"][0] >= 195
    assert growth["top_tracebacks"][0]["stack"][-1] == top["where"]
    assert len(kept) == 200


@pytest.mark.slow
def test_a_tiny_soak_of_the_demo_stack_reports_every_figure(tiny_codec_dir: Path) -> None:
    config = SoakConfig(
        requests=30,
        concurrency=4,
        baseline_at=10,
        sample_every=10,
        settle_s=0.5,
        tokens_per_s=400,
        max_tokens=96,
        codec_model=tiny_codec_dir,
    )
    messages: list[str] = []
    report = run_soak(config, "test", log=messages.append)
    assert (report["requests"], report["failed"], report["errors_by_kind"]) == (30, 0, {})
    assert (report["ok"], report["dropped"]) == (21, 9)
    mix = report["mix"]
    assert set(mix) == {f"{fmt}/{t}" for fmt in FORMATS for t in ("raw", "sse")}
    assert sum(mix.values()) == 30 and min(mix.values()) == 3
    baseline, final = report["checkpoints"]["baseline"], report["checkpoints"]["final"]
    assert (baseline["completed"], final["completed"]) == (10, 30)
    for point in (baseline, final):
        assert point["checkpoint"] and point["rss_kib"] > 50_000 and point["threads"] > 1
        kinds = point["fd_kinds"]
        assert kinds["tcp_listen"] == 1 and kinds["tcp_clients"] == 0  # the client closed its session
        assert point["fds"] == sum(n for kind, n in kinds.items() if kind != "tcp_close_wait")
    cp = report["checkpoints"]
    growth = 100 * (final["rss_kib"] - baseline["rss_kib"]) / baseline["rss_kib"]
    assert cp["rss_growth_pct"] == pytest.approx(growth, abs=1e-3)
    lm_pool_delta = final["fd_kinds"]["tcp_lm"] - baseline["fd_kinds"]["tcp_lm"]
    assert cp["lm_pool_fds_delta"] == lm_pool_delta
    assert cp["fds_delta"] == final["fds"] - baseline["fds"] - lm_pool_delta
    assert cp["threads_delta"] == final["threads"] - baseline["threads"]
    live = [s["completed"] for s in report["samples"] if not s["checkpoint"]]
    assert live == [10, 20, 30]
    assert report["targets"]["all_requests_sent"] and report["targets"]["no_failed_requests"]
    assert report["pass"] == all(report["targets"].values())
    assert "failed 0" in table(report)
    # both subprocesses were stopped and reaped
    pids = [int(n) for n in re.findall(r"pid (\d+)", messages[0])]
    assert len(pids) == 2
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists()
