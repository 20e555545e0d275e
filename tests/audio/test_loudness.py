"""LoudnessNormalizer: target level, clamp, peak cap, hold, lock, slew, limiter, chunking independence."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.signal import sosfilt

from app.audio.loudness import (
    LIMITER_CEILING,
    LIMITER_KNEE,
    LoudnessNormalizer,
    k_weighting_sos,
    soft_limit,
)
from tests.audio.chunking import stream

SR = 24_000
F = 240  # 10 ms analysis frames
B = 10  # frames in a 100 ms gating block


def noise(seconds: float, rms_db: float, seed: int = 0) -> np.ndarray:
    """Gaussian noise at an exact RMS (dBFS), float32 [seconds * SR]."""
    x = np.random.default_rng(seed).standard_normal(round(seconds * SR))
    return (x / np.sqrt(np.mean(x**2)) * 10 ** (rms_db / 20)).astype(np.float32)


def speechlike(seconds: float, seed: int, level: float = 0.3) -> np.ndarray:
    """Syllable-like bursts (tone + noise under a |sin|^2 envelope), gaps between them, float32."""
    rng = np.random.default_rng(seed)
    n = round(seconds * SR)
    t = np.arange(n) / SR
    tone = np.sin(2 * np.pi * np.cumsum(130 + 50 * np.sin(2 * np.pi * 0.6 * t)) / SR)
    env = np.clip(np.sin(2 * np.pi * 2.9 * t + 0.3), 0, None) ** 2
    return (level * env * (tone + 0.2 * rng.standard_normal(n))).astype(np.float32)


def gain_db(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Per-sample gain in dB where the limiter is not acting and the input is not tiny."""
    ok = (np.abs(y) < LIMITER_KNEE) & (np.abs(x) > 1e-3)
    return 20 * np.log10(y[ok].astype(np.float64) / x[ok])


def k_level_db(x: np.ndarray) -> float:
    """BS.1770 loudness of ``x`` without gating: -0.691 + 10 log10(mean square of the K-weighted x)."""
    z = sosfilt(k_weighting_sos(SR), x.astype(np.float64))
    return -0.691 + 10 * math.log10(np.mean(z**2))


def want_db(x: np.ndarray, target: float = -16.0, max_gain: float = 12.0, lock_frames: int = 100) -> float:
    """The gain the normalizer should choose from exactly the audio ``x`` (whole 10 ms frames).

    A plain re-statement of the module docstring: K-weighted frames, 100 ms blocks from the onset,
    absolute gate -70 LUFS, relative gate -10 dB below the mean of the blocks so far, and the lock.
    """
    z = sosfilt(k_weighting_sos(SR), x.astype(np.float64))
    ms = (z[: len(z) // F * F].reshape(-1, F) ** 2).mean(axis=1)
    peaks = np.abs(x[: len(x) // F * F]).reshape(-1, F).max(axis=1)
    absolute = 10 ** ((-70 + 0.691) / 10)
    onset = int(np.argmax(ms > absolute))
    seen: list[float] = []
    est = None
    j = len(ms) - 1
    for j in range(onset, len(ms)):
        block = ms[max(onset, j - B + 1) : j + 1].mean()
        if block <= absolute:
            continue
        seen.append(block)
        blocks = np.array(seen)
        active = blocks[blocks > blocks.mean() * 0.1]
        est = -0.691 + 10 * math.log10(active.mean())
        if len(active) >= lock_frames:
            break
    assert est is not None
    want = min(max(target - est, -max_gain), max_gain)
    peak = peaks[: j + 1].max()  # the peak stops with the statistics
    return min(want, max(0.0, 20 * math.log10(1.4 / peak)))


@pytest.mark.parametrize("level_db", [-40.0, -30.0, -16.0, -8.0])
def test_steady_input_reaches_target_within_clamp(level_db: float) -> None:
    x = noise(2.0, level_db)
    y = stream(LoudnessNormalizer(), x, [4800])
    assert len(y) == len(x) and y.dtype == np.float32
    expected = min(max(-16.0 - k_level_db(x), -12.0), 12.0)  # white noise: K-weighted about +2.9 dB
    g = gain_db(y, x)
    np.testing.assert_allclose(g, expected, atol=0.1)


def test_chunking_does_not_change_output() -> None:
    # loud enough that the limiter acts, with silence at the start and a level change before the lock
    x = np.concatenate([np.zeros(3000, np.float32), speechlike(0.8, 1, 0.05), speechlike(1.7, 2, 0.9)])
    ref = stream(LoudnessNormalizer(), x, [len(x)])
    assert len(ref) == len(x)
    assert (np.abs(ref) > LIMITER_KNEE).any()
    rnd = list(np.random.default_rng(4).integers(0, 3000, 300))
    for sizes in ([1], [7], [239], [241], rnd):
        np.testing.assert_array_equal(stream(LoudnessNormalizer(), x, sizes), ref)


def test_tiny_first_chunk_gets_the_gain_of_min_estimate_audio() -> None:
    # a quiet first 0.1 s then louder speech: a gain judged on the first chunk alone would be 7 dB off
    x = np.concatenate([noise(0.1, -40.0, 1), noise(1.9, -20.0, 2)])
    stage = LoudnessNormalizer(min_estimate_s=0.5)
    assert stage.push(x[:2400]).size == 0  # 0.1 s: held
    assert stage.push(x[2400:11_999]).size == 0  # one sample short of 0.5 s: still held
    first = stage.push(x[11_999:12_000])
    assert len(first) == 12_000
    expected = want_db(x[:12_000])
    assert abs(expected - want_db(x[:2400])) > 6
    np.testing.assert_allclose(gain_db(first, x[:12_000]), expected, atol=1e-4)
    rest = stream(stage, x[12_000:], [777])
    whole = stream(LoudnessNormalizer(min_estimate_s=0.5), x, [len(x)])
    np.testing.assert_array_equal(np.concatenate([first, rest]), whole)


def test_leading_silence_does_not_count_towards_the_estimate_window() -> None:
    x = np.concatenate([np.zeros(SR // 2, np.float32), noise(1.0, -30.0)])
    stage = LoudnessNormalizer(min_estimate_s=0.5)
    assert stage.push(x[: SR - 1]).size == 0  # silence + 0.5 s minus one sample of speech
    assert len(stage.push(x[SR - 1 : SR])) == SR


def test_all_silence_is_released_after_max_hold() -> None:
    stage = LoudnessNormalizer(max_hold_s=1.0)
    assert stage.push(np.zeros(SR - 1, np.float32)).size == 0
    out = stage.push(np.zeros(1, np.float32))
    assert len(out) == SR and not out.any()


@pytest.mark.parametrize("n", [0, 1, 100, 2400, 11_999])
def test_short_inputs_come_out_at_flush(n: int) -> None:
    x = noise(0.5, -35.0)[:n]  # K-weighted about -32 LUFS: wants +16, clamped to +12
    stage = LoudnessNormalizer(min_estimate_s=0.5)  # held until 0.5 s (the default holds only 0.1 s)
    assert stage.push(x).size == 0
    y = stage.flush()
    assert len(y) == n and y.dtype == np.float32
    if n >= F:
        np.testing.assert_allclose(gain_db(y, x), 12.0, atol=0.05)


def test_gain_locks_after_lock_s_of_active_audio() -> None:
    quiet = noise(1.2, -30.5, 1)  # 1.2 s: more than lock_s = 1.0 of active audio
    later = np.concatenate([noise(1.0, -8.0, 2), noise(1.0, -45.0, 3), noise(0.5, -28.0, 4)])
    x = np.concatenate([quiet, later])
    stage = LoudnessNormalizer()
    y = stream(stage, x, [4800])
    assert stage.locked
    locked = want_db(x)  # statistics of the first 1.0 s of active audio
    assert locked == want_db(x[:SR])
    assert 11.0 < locked < 12.0
    np.testing.assert_allclose(gain_db(y[len(quiet) :], later), locked, atol=1e-4)
    assert stage.gain_db == pytest.approx(locked)


def test_gain_moves_before_lock_at_most_at_the_slew_rate() -> None:
    # estimate from 0.5 s at -40 dBFS (clamped +12 dB), then -23 dBFS (-20 LUFS) wants +4 dB: it glides
    x = np.concatenate([noise(0.5, -40.0, 1), noise(2.5, -23.0, 2)])
    stage = LoudnessNormalizer(max_slew_db_per_s=4.0)
    y = stream(stage, x, [2400])
    ends = np.arange(F - 1, len(x), F)  # last sample of each frame: the frame's end gain, exactly
    frame_gain = 20 * np.log10(y[ends].astype(np.float64) / x[ends])
    np.testing.assert_allclose(frame_gain[:51], 12.0, atol=1e-5)  # the held window and the next: one gain
    unlimited = np.abs(y[ends]) < LIMITER_KNEE
    steps = np.diff(frame_gain[unlimited]) / np.diff(ends[unlimited] // F)
    assert np.abs(steps).max() <= 4.0 * 0.01 + 1e-5
    assert frame_gain[100] < frame_gain[60] < 12.0  # it did move, downwards
    # locked after 1 s of active audio (the -40 dBFS blocks fall below the relative gate)
    locked = want_db(x)
    assert 3.0 < locked < 5.0
    assert frame_gain[-1] == pytest.approx(locked, abs=0.01)


def test_clamp_and_peak_cap() -> None:
    x = noise(1.5, -60.0 + 20.0, 1)  # -40 dBFS: wants +24, clamped to +6 here
    y = stream(LoudnessNormalizer(max_gain_db=6.0, min_estimate_s=0.5), x, [4800])
    np.testing.assert_allclose(gain_db(y, x), 6.0, atol=1e-4)
    # quiet but with one hot spike: the boost stops where peak * gain = 1.4
    spiky = noise(1.5, -30.0, 2)
    spiky[5000] = 0.7
    y = stream(LoudnessNormalizer(min_estimate_s=0.5), spiky, [4800])  # the spike is in the hold
    np.testing.assert_allclose(gain_db(y, spiky), 20 * math.log10(1.4 / 0.7), atol=1e-4)


def test_k_weighting_matches_bs1770_at_48k_and_reads_a_1khz_tone_as_its_rms() -> None:
    sos = k_weighting_sos(48_000)
    shelf = [1.53512485958697, -2.69169618940638, 1.19839281085285, 1.0, -1.69065929318241, 0.73248077421585]
    highpass = [1.0, -2.0, 1.0, 1.0, -1.99004745483398, 0.99007225036621]
    np.testing.assert_allclose(sos, [shelf, highpass], atol=1e-10)
    tone = 10 ** (-24 / 20) * math.sqrt(2) * np.sin(2 * np.pi * 1000 * np.arange(2 * SR) / SR)
    assert k_level_db(tone[SR:]) == pytest.approx(-24.0, abs=0.05)
    y = stream(LoudnessNormalizer(), tone.astype(np.float32), [4800])  # target -16: +8 dB
    np.testing.assert_allclose(gain_db(y, tone.astype(np.float32)), 8.0, atol=0.05)


def test_k_weighting_weighs_treble_up() -> None:
    # same RMS, different spectrum: a 4 kHz tone reads about 4 dB louder than a 500 Hz one
    t = np.arange(2 * SR) / SR
    low = (0.1 * np.sin(2 * np.pi * 500 * t)).astype(np.float32)
    high = (0.1 * np.sin(2 * np.pi * 4000 * t)).astype(np.float32)
    g_low = np.median(gain_db(stream(LoudnessNormalizer(), low, [4800]), low))
    g_high = np.median(gain_db(stream(LoudnessNormalizer(), high, [4800]), high))
    assert 3.0 < g_low - g_high < 5.0


def test_estimate_does_not_depend_on_the_input_level() -> None:
    # speech-like bursts with quiet gaps: a fixed -50 dBFS floor counted fewer frames at -20 dB
    x = speechlike(3.0, 5, 0.3)
    ref = None
    for level in (-20.0, -10.0, 0.0, 6.0):
        g = 10 ** (level / 20)
        stage = LoudnessNormalizer(max_gain_db=40.0)
        y = stream(stage, (x * g).astype(np.float32), [2400])
        assert stage.gain_db is not None
        total = stage.gain_db + level  # the same output level whatever the input level
        ref = total if ref is None else ref
        assert total == pytest.approx(ref, abs=1e-6)
        assert np.abs(y).max() < 1.0


def test_relative_gate_ignores_quiet_stretches() -> None:
    # 0.5 s pauses of noise 30 dB below the speech do not pull the estimate down
    speech = noise(0.5, -26.0, 1)
    pause = noise(0.5, -56.0, 2)
    x = np.concatenate([speech, pause, speech, pause, speech])
    stage = LoudnessNormalizer()
    stream(stage, x, [4800])
    speech_only = -16.0 - k_level_db(speech)
    ungated = -16.0 - k_level_db(x)  # about 2 dB more boost
    assert stage.gain_db == pytest.approx(speech_only, abs=0.5)  # blocks across the edges count a bit
    assert ungated - stage.gain_db > 1.5


@pytest.mark.parametrize("level_db", [0.0, 20.0])
def test_limiter_never_reaches_full_scale(level_db: float) -> None:
    # hot input: a clipped-to-nothing square-ish wave and noise far above full scale
    t = np.arange(2 * SR) / SR
    x = (10 ** (level_db / 20) * np.sign(np.sin(2 * np.pi * 200 * t)) * (1 + noise(2.0, 0.0))).astype(
        np.float32
    )
    y = stream(LoudnessNormalizer(max_gain_db=0.0), x, [4800])
    assert np.abs(y).max() <= LIMITER_CEILING < 1.0


def test_soft_limit_curve() -> None:
    y = np.linspace(-50, 50, 200_001)
    out = soft_limit(y)
    assert out.dtype == np.float32
    assert np.abs(out).max() <= LIMITER_CEILING
    below = np.abs(y) <= LIMITER_KNEE
    np.testing.assert_array_equal(out[below], y[below].astype(np.float32))
    assert np.all(np.diff(out) >= 0)  # monotonic
    slope = np.diff(out.astype(np.float64)) / np.diff(y)
    assert slope.max() <= 1.0 + 1e-3  # no corner: the slope is 1 at the knee and falls after it
    assert soft_limit(np.array([1.4]))[0] == pytest.approx(0.9899, abs=1e-4)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_gain_db": -1.0},
        {"lock_s": -0.5},
        {"min_estimate_s": float("nan")},
        {"target_lufs": float("inf")},
        {"sample_rate": 0},
        {"relative_gate_db": 3.0},
        {"block_s": -0.1},
    ],
)
def test_rejects_bad_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        LoudnessNormalizer(**kwargs)


def test_push_after_flush_and_multichannel_rejected() -> None:
    stage = LoudnessNormalizer()
    with pytest.raises(ValueError):
        stage.push(np.zeros((2, 10), np.float32))
    stage.flush()
    with pytest.raises(RuntimeError):
        stage.push(np.zeros(10, np.float32))
