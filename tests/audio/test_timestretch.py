"""TimeStretch (WSOLA): exact length, chunking independence, bypass at 1.0, pitch and tempo, joins."""

from __future__ import annotations

import numpy as np
import pytest

from app.audio.timestretch import TimeStretch
from tests.audio.chunking import stream

SR = 24_000
RATES = [0.5, 0.75, 1.25, 1.5, 2.0]


def harmonic(f0: float, seconds: float, sr: int = SR) -> np.ndarray:
    """A voiced-like tone: f0 and three weaker harmonics, float32 [seconds * sr]."""
    t = np.arange(round(seconds * sr)) / sr
    amps = [0.4, 0.2, 0.12, 0.06]
    x = sum(a * np.sin(2 * np.pi * f0 * (h + 1) * t + h) for h, a in enumerate(amps))
    return x.astype(np.float32)


def speechlike(seconds: float, seed: int) -> np.ndarray:
    """Noise bursts and gliding tones with silences between them, float32 [seconds * SR]."""
    rng = np.random.default_rng(seed)
    n = round(seconds * SR)
    t = np.arange(n) / SR
    tone = np.sin(2 * np.pi * np.cumsum(120 + 60 * np.sin(2 * np.pi * 0.7 * t)) / SR)
    env = np.clip(np.sin(2 * np.pi * 2.3 * t), 0, None) ** 2
    return (0.3 * env * tone + 0.05 * env * rng.standard_normal(n)).astype(np.float32)


def fundamental(y: np.ndarray, sr: int = SR) -> float:
    """Frequency of the strongest FFT peak (zero-padded, Hann window)."""
    spec = np.abs(np.fft.rfft(y * np.hanning(len(y)), 8 * len(y)))
    return float(np.fft.rfftfreq(8 * len(y), 1 / sr)[np.argmax(spec)])


@pytest.mark.parametrize("rate", [0.4999, 2.0001, 0.0, -1.0, float("nan"), float("inf")])
def test_rejects_rates_outside_range(rate: float) -> None:
    with pytest.raises(ValueError):
        TimeStretch(rate)


def test_rate_one_is_exact_bypass() -> None:
    x = speechlike(1.0, seed=0)
    stage = TimeStretch(1.0)
    sizes = list(np.random.default_rng(0).integers(1, 3000, 100))
    np.testing.assert_array_equal(stream(stage, x, sizes), x)


@pytest.mark.parametrize("rate", RATES)
@pytest.mark.parametrize("n", [0, 1, 2, 100, 959, 1139, 1141, 2000, 24_001])
def test_length_is_round_n_over_rate(rate: float, n: int) -> None:
    x = speechlike(1.1, seed=1)[:n]
    y = stream(TimeStretch(rate), x, [max(n, 1)])
    assert y.dtype == np.float32
    assert len(y) == round(n / rate)
    assert np.all(np.isfinite(y))


@pytest.mark.parametrize("rate", RATES)
def test_chunking_does_not_change_output(rate: float) -> None:
    x = speechlike(1.5, seed=2)
    ref = stream(TimeStretch(rate), x, [len(x)])
    assert len(ref) == round(len(x) / rate)
    for sizes in ([7], [331], list(np.random.default_rng(3).integers(0, 4000, 100))):
        np.testing.assert_array_equal(stream(TimeStretch(rate), x, sizes), ref)
    short = x[:9000]
    np.testing.assert_array_equal(
        stream(TimeStretch(rate), short, [1]), stream(TimeStretch(rate), short, [len(short)])
    )


@pytest.mark.parametrize("rate", RATES)
def test_pitch_is_kept_and_joins_are_smooth(rate: float) -> None:
    f0 = 173.0
    x = harmonic(f0, 1.5)
    y = stream(TimeStretch(rate), x, [2400])
    body = y[1200:-1200]  # away from the edges
    assert abs(fundamental(body) - f0) / f0 < 0.02
    # a well-matched join is no steeper than the tone itself; a badly matched one would jump
    assert np.abs(np.diff(body)).max() <= 1.05 * np.abs(np.diff(x)).max()
    # the level holds across joins: RMS of every 20 ms frame within 1 dB of the input's
    frames = body[: len(body) // 480 * 480].reshape(-1, 480)
    rms_db = 20 * np.log10(np.sqrt((frames.astype(np.float64) ** 2).mean(axis=1)))
    ref_db = 20 * np.log10(np.sqrt((x.astype(np.float64) ** 2).mean()))
    assert np.abs(rms_db - ref_db).max() < 1.0


@pytest.mark.parametrize("rate", RATES)
def test_events_move_to_time_over_rate(rate: float) -> None:
    """Short tone bursts at known times come out at time / rate (within one block, 40 ms)."""
    n = 2 * SR
    x = np.zeros(n, np.float32)
    starts = [0.2, 0.7, 1.1, 1.6]
    burst = harmonic(300.0, 0.06)
    for s in starts:
        x[round(s * SR) : round(s * SR) + len(burst)] = burst
    y = stream(TimeStretch(rate), x, [1000])
    loud = np.flatnonzero(np.abs(y) > 0.05)
    found = loud[np.concatenate([[True], np.diff(loud) > 2400])] / SR  # first loud sample of each burst
    assert len(found) == len(starts)
    np.testing.assert_allclose(found, np.array(starts) / rate, atol=0.04)


def test_silence_stays_silent_and_input_is_not_modified() -> None:
    x = np.zeros(5000, np.float32)
    assert not stream(TimeStretch(0.75), x, [333]).any()
    tone = harmonic(200.0, 0.5)
    kept = tone.copy()
    stream(TimeStretch(1.5), tone, [1000])
    np.testing.assert_array_equal(tone, kept)


def test_push_after_flush_and_multichannel_rejected() -> None:
    stage = TimeStretch(1.25)
    with pytest.raises(ValueError):
        stage.push(np.zeros((2, 10), np.float32))
    stage.flush()
    with pytest.raises(RuntimeError):
        stage.push(np.zeros(10, np.float32))


@pytest.mark.parametrize("rate", RATES)
def test_low_voice_keeps_regular_periods(rate: float) -> None:
    """A 70 Hz voice (a period, 14.3 ms, longer than the 8 ms crossfade) joins without phase jumps."""
    f0 = 70.0
    x = harmonic(f0, 2.0)
    y = stream(TimeStretch(rate), x, [1000])
    body = y[2400:-2400]
    assert abs(fundamental(body) - f0) / f0 < 0.02
    assert np.abs(np.diff(body)).max() <= 1.05 * np.abs(np.diff(x)).max()
    # each period of the output repeats the one before it: a wrong-phase join would break this
    period = SR / f0
    lag = round(period)
    diff = body[lag:] - body[:-lag]
    assert np.sqrt(np.mean(diff**2)) < 0.1 * np.sqrt(np.mean(body**2))
