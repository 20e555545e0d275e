"""bench/schedule_sim.py: the server's schedule, admission and synthesize on a simulated clock against a
modeled codec. With the full-size bf16 decoder's cost on 2 cores the current defaults keep every admitted
listener fed (refusing what the codec cannot carry), where the previous defaults let them run dry."""

from __future__ import annotations

import json

import pytest

from bench.schedule_sim import FIXED_S, PER_CODE_S, PREVIOUS, main, settings_for, simulate

CURRENT = settings_for({})


@pytest.mark.parametrize(
    ("rate", "streams"), [(100, 1), (100, 4), (100, 8), (200, 4), (200, 8), (0, 4), (0, 8)]
)
def test_the_defaults_keep_every_admitted_listener_fed(rate: float, streams: int) -> None:
    figures = simulate(CURRENT, FIXED_S, PER_CODE_S, rate, streams, 250)
    assert figures["worst_stall_s"] == 0.0 and figures["stalled_streams"] == 0
    assert figures["first_audio_s_p50"] <= 0.6
    assert figures["decoded_per_emitted"] <= 1.5


@pytest.mark.parametrize(("rate", "streams"), [(50, 1), (50, 4), (60, 8)])
def test_an_lm_at_about_real_time_starts_later_and_never_runs_dry(rate: float, streams: int) -> None:
    """Each window after the first waits for a cut's 10 codes, which an LM at real time sends just as the
    window before ends: the first audio waits for that lead instead of the listener running dry."""
    figures = simulate(CURRENT, FIXED_S, PER_CODE_S, rate, streams, 250)
    assert figures["worst_stall_s"] == 0.0 and figures["stalled_streams"] == 0
    assert figures["first_audio_s_p50"] <= 20 / rate + 0.55  # its 20 codes, decodes and the hold


def test_first_audio_of_one_stream_at_a_served_models_pace() -> None:
    """10 codes of the first window + 10 of future context at 100 tokens/s, then one decode of 20."""
    figures = simulate(CURRENT, FIXED_S, PER_CODE_S, 100, 1, 250)
    assert figures["first_audio_s_p50"] == pytest.approx(0.2 + 0.002 + FIXED_S + 20 * PER_CODE_S, abs=0.005)


def test_a_load_the_codec_cannot_carry_is_refused_not_stalled() -> None:
    """Sixteen streams at 100 tokens/s would need more decoding than the codec does: some get 429."""
    figures = simulate(CURRENT, FIXED_S, PER_CODE_S, 100, 16, 250)
    assert figures["refused"] >= 4 and figures["worst_stall_s"] == 0.0
    previous = simulate(settings_for(PREVIOUS), FIXED_S, PER_CODE_S, 100, 16, 250)
    assert previous["refused"] == 0 and previous["worst_stall_s"] > 1.0


def test_a_slower_codec_serves_fewer_streams_with_longer_first_windows() -> None:
    """An AVX2-only CPU's float32 decoder is about twice as slow: the same load is refused sooner."""
    fast = simulate(CURRENT, FIXED_S, PER_CODE_S, 100, 8, 250)
    slow = simulate(CURRENT, 2 * FIXED_S, 2 * PER_CODE_S, 100, 8, 250)
    assert slow["refused"] > fast["refused"] and slow["worst_stall_s"] == 0.0


def test_the_command_prints_both_configurations(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--rates", "100,0", "--streams", "2"])
    report = json.loads(capsys.readouterr().out)
    assert set(report["results"]) == {"previous", "current"}
    assert set(report["results"]["current"]) == {"100x2", "0x2"}
    assert report["codec"] == {"fixed_s": FIXED_S, "per_code_s": PER_CODE_S, "fit": None}
