"""bench/realtime_bench.py against the test server: every mode speaks every reply and reports its
latencies and stalls."""

from __future__ import annotations

import argparse

import pytest

from bench.realtime_bench import REPLIES, Session, llm_tokens, run, table
from tests.sessions.conftest import MOSS, Served


def test_llm_tokens_rebuild_the_text() -> None:
    for reply in REPLIES:
        tokens = llm_tokens(reply)
        assert "".join(tokens) == reply and max(len(t.strip()) for t in tokens) <= 6


def test_stalls_are_counted_from_a_listener_who_starts_at_the_first_audio() -> None:
    session = Session(first_token=0.0, last_token=1.0)
    session.arrivals = [(1.0, 0.5), (2.0, 0.5), (2.5, 0.5)]  # runs dry at 1.5 for 0.5 s, then keeps up
    report = session.report()
    assert report["first_audio_s"] == 1.0 and report["end_s"] == 1.5
    assert report["stalls"] == 1 and report["stall_s"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("model", "voice"), [(MOSS, "default"), ("tts-1", "husein")], ids=["moss", "neucodec"]
)
async def test_every_mode_reports(served: Served, model: str, voice: str) -> None:
    args = argparse.Namespace(
        url=served.url,
        model=model,
        voice=voice,
        sessions=[2],
        modes=["realtime", "whole", "sentences"],
        tokens_per_s=400.0,
        max_tokens=0,
        chars=0,
        first_sentence=False,
    )
    report = await run(args)
    assert [(r["mode"], r["sessions"]) for r in report["runs"]] == [
        (mode, n) for n in (2,) for mode in ("realtime", "whole", "sentences")
    ]
    for r in report["runs"]:
        assert r["failed"] == 0, r
        assert r["first_audio_s"] > 0 and r["end_s"] is not None
    assert "realtime" in table(report)
