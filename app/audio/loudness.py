"""Per-utterance loudness: one gain towards a target K-weighted active level, locked early, then a limiter.

Analysis runs on fixed 10 ms frames counted from the first sample of the response (F = 240 samples at
24 kHz), never on ``push()`` boundaries, so the output does not depend on how the input is chunked.

- **Level** (ITU-R BS.1770 weighting): the input goes through the K-weighting pre-filter (high shelf
  +4 dB above about 1.5 kHz, then a 38 Hz high-pass; the two biquads are derived for the stage's sample
  rate and match the standard's 48 kHz coefficients) with the filter state carried across chunks, so
  each filtered sample does not depend on the chunking. The filter only feeds the analysis: the output
  is the input times the gain. Levels are BS.1770 loudness, ``L = -0.691 + 10 log10(mean square of
  the filtered signal)``, in LUFS (for a 1 kHz tone, L is its RMS in dBFS within 0.01 dB).
- **Gating** (BS.1770's gates, on ``block_s`` = 100 ms blocks instead of 400 ms): after each frame,
  the block of the last ``block_s`` of audio (fewer frames right after the onset) is measured; blocks
  with L at or below ``active_floor_db`` (-70, the absolute gate) are never counted. Of the blocks
  above it, those whose mean square is above the mean of all of them times
  ``10^(relative_gate_db / 10)`` (-10 dB, the relative gate) are *active*, and the estimate is
  ``est_db = -0.691 + 10 log10(mean square of the active blocks)``. The relative gate is recomputed
  on every frame, so a quiet input is measured like a loud one: the estimate scales exactly with the
  input gain as long as the speech stays above the absolute gate (a fixed -50 dBFS floor, as before,
  dropped the quiet frames of quiet input only). Blocks are shorter than the standard's 400 ms because
  the statistics lock after about 1 s: 100 ms blocks sample that second more finely.
  ``target_lufs`` (the ``TARGET_LOUDNESS_LUFS`` setting, -16) is therefore a K-weighted, gated level in
  LUFS, not an RMS in dBFS. A BS.1770 meter over the whole normalized utterance reads about 1 dB lower
  for espeak-ng speech (its 400 ms blocks average in more of the gaps between words), plus whatever
  the first second differs from the rest (``bench/audio_quality.py``: -16.8 to -17.5 LUFS). The
  running ``peak`` is the largest ``|x|`` of the unfiltered input.
- The wanted gain is ``want = clip(target_lufs - est_db, +-max_gain_db)``, and a boost is capped so
  that ``peak * gain <= LIMITER_DRIVE`` (a cut is never forced by the cap; the limiter handles hot
  input). With no frame above the absolute gate yet, ``want = 0 dB``. ``max_gain_db`` bounds how far
  the input level may be from the target: input at -40 LUFS needs +24 dB, more than the default 12.
- **Hold**: nothing is emitted until ``min_estimate_s`` of audio has arrived counted from the first
  10 ms frame above the absolute gate (the onset, so leading silence does not count), or
  ``max_hold_s`` of audio in all, or ``flush()``. The gain of everything held back is the ``want`` at
  that point. Cost: extra first-audio latency only when the first window the stitcher delivers is
  shorter than (leading silence + ``min_estimate_s``), e.g. at ``playback_speed`` below 0.5 s; in
  exchange the first gain is never judged on a 0.1 s window.
- **Settling**: after the hold, the gain at the end of frame j+1 moves from the gain at the end of
  frame j towards the ``want`` of frames 0..j by at most ``max_slew_db_per_s * F / sample_rate`` dB,
  and it ramps linearly (in amplitude) across each frame, so it never steps.
- **Lock**: once ``lock_s`` of active audio has been seen (blocks, one per frame, passing both gates,
  counted with the relative gate of that moment), or ``4 lock_s`` of blocks above the absolute gate
  (which bounds the memory the relative gate needs), the statistics and so ``want`` freeze; the gain
  reaches that locked value at the slew rate and never changes after that.
- **Limiter**: ``|y| <= LIMITER_KNEE`` (0.85) passes unchanged; above it
  ``|y| -> knee + w tanh((|y| - knee) / w)`` with ``w = LIMITER_CEILING - knee`` (ceiling 0.99): slope 1 at
  the knee (no corner) and ``|y| <= 0.99`` for any input, so nothing reaches full scale.
"""

from __future__ import annotations

import math

import numpy as np

from app.audio.pcm import as_mono_f32
from app.core import defaults
from app.core.constants import SAMPLE_RATE

FRAME_S = 0.010
LUFS_OFFSET_DB = -0.691  # BS.1770: loudness = -0.691 + 10 log10(mean square of the K-weighted signal)
_LOCK_ABSOLUTE_FACTOR = 4  # also lock after this many lock_s of audio above the absolute gate


def k_weighting_sos(sample_rate: int) -> np.ndarray:
    """ITU-R BS.1770 K-weighting pre-filter for ``sample_rate`` as second-order sections [2, 6].

    The high shelf and the high-pass are the analogue prototypes fitted to the standard's 48 kHz
    coefficients (B. De Man's derivation, as in pyloudnorm's ``DeMan`` filter), bilinear-transformed.
    """
    f0, gain_db, q = 1681.9744509555319, 3.99984385397, 0.7071752369554193
    k = math.tan(math.pi * f0 / sample_rate)
    vh = 10.0 ** (gain_db / 20.0)
    vb = vh**0.499666774155
    a0 = 1.0 + k / q + k * k
    shelf = [
        (vh + vb * k / q + k * k) / a0,
        2.0 * (k * k - vh) / a0,
        (vh - vb * k / q + k * k) / a0,
        1.0,
        2.0 * (k * k - 1.0) / a0,
        (1.0 - k / q + k * k) / a0,
    ]
    f0, q = 38.13547087613982, 0.5003270373253953
    k = math.tan(math.pi * f0 / sample_rate)
    a0 = 1.0 + k / q + k * k
    highpass = [1.0, -2.0, 1.0, 1.0, 2.0 * (k * k - 1.0) / a0, (1.0 - k / q + k * k) / a0]
    return np.array([shelf, highpass], dtype=np.float64)


LIMITER_KNEE = 0.85
LIMITER_CEILING = 0.99
LIMITER_DRIVE = 1.4  # the cap on peak * boost; the limiter maps 1.4 to about 0.9899


def soft_limit(y: np.ndarray) -> np.ndarray:
    """Soft-knee tanh limiter, float64 [N] -> float32 [N] with every ``|y| <= LIMITER_CEILING``."""
    width = LIMITER_CEILING - LIMITER_KNEE
    mag = np.abs(y)
    over = mag > LIMITER_KNEE
    if over.any():
        y = y.copy()
        y[over] = np.sign(y[over]) * (LIMITER_KNEE + width * np.tanh((mag[over] - LIMITER_KNEE) / width))
    return y.astype(np.float32)


class LoudnessNormalizer:
    """Streaming loudness stage, float32 [N] chunks in and out; see the module docstring.

    ``gain_db`` is the gain applied at the last emitted sample (None before the first emission) and
    ``locked`` tells whether the statistics have frozen.
    """

    def __init__(
        self,
        target_lufs: float = defaults.TARGET_LOUDNESS_LUFS,
        max_gain_db: float = defaults.MAX_GAIN_DB,
        lock_s: float = defaults.NORM_LOCK_S,
        min_estimate_s: float = defaults.NORM_MIN_ESTIMATE_S,
        sample_rate: int = SAMPLE_RATE,
        active_floor_db: float = -70.0,
        max_slew_db_per_s: float = 4.0,
        max_hold_s: float = 2.0,
        relative_gate_db: float = -10.0,
        block_s: float = 0.1,
    ) -> None:
        values = {
            "target_lufs": target_lufs,
            "max_gain_db": max_gain_db,
            "lock_s": lock_s,
            "min_estimate_s": min_estimate_s,
            "active_floor_db": active_floor_db,
            "max_slew_db_per_s": max_slew_db_per_s,
            "max_hold_s": max_hold_s,
            "relative_gate_db": relative_gate_db,
            "block_s": block_s,
        }
        for name, value in values.items():
            if not (isinstance(value, int | float) and math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        for name in ("max_gain_db", "lock_s", "min_estimate_s", "max_slew_db_per_s", "max_hold_s", "block_s"):
            if values[name] < 0:
                raise ValueError(f"{name} must be >= 0, got {values[name]!r}")
        if relative_gate_db > 0:
            raise ValueError(f"relative_gate_db must be <= 0, got {relative_gate_db!r}")
        if not (isinstance(sample_rate, int) and sample_rate > 0):
            raise ValueError(f"sample_rate must be a positive integer, got {sample_rate!r}")
        self.target_lufs = float(target_lufs)
        self.max_gain_db = float(max_gain_db)
        self.sample_rate = sample_rate
        self._frame = max(1, round(FRAME_S * sample_rate))
        frame_s = self._frame / sample_rate
        self._hold_frames = math.ceil(min_estimate_s / frame_s)
        self._max_hold_frames = max(self._hold_frames, math.ceil(max_hold_s / frame_s))
        self._lock_frames = math.ceil(lock_s / frame_s)
        self._block_frames = max(1, round(block_s / frame_s))
        self._slew_db = max_slew_db_per_s * frame_s
        # gates on the mean square of the K-weighted frame (levels in LUFS, see LUFS_OFFSET_DB)
        self._absolute_ms = 10.0 ** ((active_floor_db - LUFS_OFFSET_DB) / 10.0)
        self._relative = 10.0 ** (relative_gate_db / 10.0)
        self._sos = k_weighting_sos(sample_rate)
        # analysis state (frames are [j F, (j+1) F) of the input)
        self._n_in = 0
        self._zi = np.zeros((len(self._sos), 2), dtype=np.float64)  # K-weighting filter state
        self._partial = np.zeros(0, dtype=np.float64)  # K-weighted samples of the incomplete frame
        self._partial_peak = 0.0  # largest |x| of the incomplete frame
        self._ring = np.zeros(self._block_frames)  # mean squares of the last block_frames frames
        self._n_frames = 0  # frames counted since the onset
        self._ms = np.zeros(_LOCK_ABSOLUTE_FACTOR * self._lock_frames + 1)  # blocks above the gate
        self._n_abs = 0  # blocks above the absolute gate (their mean squares are _ms[:n_abs])
        self._est_ms = 0.0  # mean square of the active frames
        self._n_active = 0
        self._peak = 0.0
        self._onset: int | None = None  # first active frame
        self._locked = False
        # output state
        self._held: list[np.ndarray] = []  # input not yet emitted (only before the release)
        self._released = False
        self._gain_db = 0.0  # gain at the end of the last completed frame (dB)
        self._gains: list[float] = []  # linear gain at the end of frames gain_base, gain_base + 1, ...
        self._gain_base = 0
        self._settled = False  # locked and the gain has reached the locked value
        self._last_gain: float | None = None
        self._flushed = False

    @property
    def gain_db(self) -> float | None:
        return self._last_gain

    @property
    def locked(self) -> bool:
        return self._locked

    def push(self, pcm: np.ndarray) -> np.ndarray:
        """Take a chunk [N]; return the samples whose gain is known (float32, possibly empty)."""
        if self._flushed:
            raise RuntimeError("push() after flush()")
        x = as_mono_f32(pcm)
        start = self._n_in
        if not self._released:
            self._held.append(x)
        self._analyse(x)
        if not self._released:
            return np.zeros(0, dtype=np.float32)
        if self._held:
            x, self._held = np.concatenate(self._held), []
            start = self._n_in - len(x)
        out = self._apply(x, start)
        drop = self._n_in // self._frame - 1 - self._gain_base  # the next chunk starts in frame n_in // F
        if drop > 0 and len(self._gains) > 1:
            drop = min(drop, len(self._gains) - 1)
            del self._gains[:drop]
            self._gain_base += drop
        return out

    def flush(self) -> np.ndarray:
        """End of input: release what is held, with the gain estimated from all of it."""
        if self._flushed:
            raise RuntimeError("flush() called twice")
        self._flushed = True
        if self._released:
            return np.zeros(0, dtype=np.float32)
        if len(self._partial):
            self._add_frame_stats(float(np.mean(np.square(self._partial))), self._partial_peak)
        self._release(self._n_in // self._frame)
        held = np.concatenate(self._held) if self._held else np.zeros(0, dtype=np.float32)
        self._held = []
        return self._apply(held, 0)

    def _want_db(self) -> float:
        """Gain towards the target from the statistics so far, clamped and capped by the peak."""
        if self._n_active == 0:
            return 0.0
        est_db = LUFS_OFFSET_DB + 10.0 * math.log10(self._est_ms)
        want = min(max(self.target_lufs - est_db, -self.max_gain_db), self.max_gain_db)
        if self._peak > 0:
            want = min(want, max(0.0, 20.0 * math.log10(LIMITER_DRIVE / self._peak)))
        return want

    def _add_frame_stats(self, ms: float, peak: float) -> None:
        """Count one frame (K-weighted mean square ``ms``, largest ``|x|`` ``peak``) unless locked."""
        if self._locked:
            return
        self._peak = max(self._peak, peak)
        if self._n_frames == 0 and ms <= self._absolute_ms:
            return  # before the onset
        self._ring[self._n_frames % len(self._ring)] = ms
        self._n_frames += 1
        ms = float(np.mean(self._ring[: self._n_frames]))  # the block ending with this frame
        if ms <= self._absolute_ms:
            return
        self._ms[self._n_abs] = ms
        self._n_abs += 1
        seen = self._ms[: self._n_abs]
        active = seen[seen > float(np.mean(seen)) * self._relative]  # never empty: the max passes
        self._est_ms = float(np.mean(active))
        self._n_active = len(active)
        self._locked = self._n_active >= self._lock_frames or self._n_abs >= len(self._ms) - 1

    def _analyse(self, x: np.ndarray) -> None:
        """Complete the frames ``x`` finishes, in order: statistics, hold release, next gains."""
        first = self._n_in // self._frame
        self._n_in += len(x)
        if self._settled:
            return
        if len(x) == 0:
            return
        from scipy.signal import sosfilt  # deferred: importing scipy.signal takes about a second

        weighted, self._zi = sosfilt(self._sos, x.astype(np.float64), zi=self._zi)  # [N] float64
        head = self._frame - len(self._partial)  # samples of x that complete the partial frame
        data = np.concatenate([self._partial, weighted])
        n_frames = len(data) // self._frame
        frames = data[: n_frames * self._frame].reshape(n_frames, self._frame)
        self._partial = data[n_frames * self._frame :].copy()
        mag = np.abs(x)
        if n_frames == 0:
            self._partial_peak = max(self._partial_peak, float(mag.max()))
            return
        # peaks of the completed frames: the first one includes the partial frame's samples
        bounds = np.arange(n_frames) * self._frame + head
        peaks = np.maximum.reduceat(mag[: bounds[-1]], np.concatenate([[0], bounds[:-1]])).tolist()
        peaks[0] = max(peaks[0], self._partial_peak)
        self._partial_peak = float(mag[bounds[-1] :].max()) if bounds[-1] < len(mag) else 0.0
        mean_sq = np.mean(np.square(frames), axis=1).tolist()  # [n_frames]
        for i in range(n_frames):
            j = first + i
            self._add_frame_stats(mean_sq[i], peaks[i])
            if self._onset is None and self._n_frames > 0:
                self._onset = j
            if not self._released:
                since_onset = 0 if self._onset is None else j - self._onset + 1
                if since_onset >= self._hold_frames or j + 1 >= self._max_hold_frames:
                    self._release(j + 1)
                continue
            if not self._next_gain():
                return

    def _release(self, next_frame: int) -> None:
        """End the hold: frames before ``next_frame`` and ``next_frame`` itself get the current want."""
        self._released = True
        self._gain_db = self._want_db()
        self._gains = [10.0 ** (self._gain_db / 20.0)]
        self._gain_base = next_frame
        self._settled = self._locked

    def _next_gain(self) -> bool:
        """Append the end gain of the next frame; False once the gain has settled for good."""
        want = self._want_db()
        if abs(want - self._gain_db) <= self._slew_db:
            self._gain_db = want
        else:
            self._gain_db += math.copysign(self._slew_db, want - self._gain_db)
        self._gains.append(10.0 ** (self._gain_db / 20.0))
        self._settled = self._locked and self._gain_db == want
        return not self._settled

    def _apply(self, x: np.ndarray, start: int) -> np.ndarray:
        """Gain and limiter for input samples [start, start + len(x)): float32 [N] -> float32 [N]."""
        if len(x) == 0:
            return np.zeros(0, dtype=np.float32)
        last = len(self._gains) - 1
        if start // self._frame - 1 - self._gain_base >= last:  # every frame here ramps last -> last
            gain: np.ndarray | float = self._gains[-1]
            self._last_gain = 20.0 * math.log10(self._gains[-1])
        else:
            pos = np.arange(start, start + len(x))
            index = pos // self._frame - self._gain_base  # into gains: the frame's end gain
            gains = np.array(self._gains)
            g_end = gains[np.minimum(np.maximum(index, 0), last)]
            g_start = gains[np.minimum(np.maximum(index - 1, 0), last)]
            ramp = g_start + (g_end - g_start) * (((pos % self._frame) + 1) / self._frame)
            self._last_gain = 20.0 * math.log10(float(ramp[-1]))
            gain = ramp
        return soft_limit(x.astype(np.float64) * gain)
