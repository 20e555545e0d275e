"""Per-utterance loudness: one gain towards a target active RMS, locked early, then a soft limiter.

Analysis runs on fixed 10 ms frames counted from the first sample of the response (F = 240 samples at
24 kHz), never on ``push()`` boundaries, so the output does not depend on how the input is chunked.

- A frame is *active* when its RMS is above ``active_floor_db`` (-50 dBFS). The estimate is the mean
  square of the active frames, ``est_db = 10 log10(sum(ms_active) / n_active)``, and the running
  ``peak`` is the largest ``|x|`` seen.
- The wanted gain is ``want = clip(target_rms_db - est_db, +-max_gain_db)``, and a boost is capped so
  that ``peak * gain <= LIMITER_DRIVE`` (a cut is never forced by the cap; the limiter handles hot
  input). With no active frame yet, ``want = 0 dB``.
- **Hold**: nothing is emitted until ``min_estimate_s`` of audio has arrived counted from the first
  active frame (so leading silence does not count), or ``max_hold_s`` of audio in all, or ``flush()``.
  The gain of everything held back is the ``want`` at that point. Cost: extra first-audio latency only
  when the first window the stitcher delivers is shorter than (leading silence + ``min_estimate_s``),
  e.g. at ``playback_speed`` below 0.5 s; in exchange the first gain is never judged on a 0.1 s window.
- **Settling**: after the hold, the gain at the end of frame j+1 moves from the gain at the end of
  frame j towards the ``want`` of frames 0..j by at most ``max_slew_db_per_s * F / sample_rate`` dB,
  and it ramps linearly (in amplitude) across each frame, so it never steps.
- **Lock**: once ``lock_s`` of active audio has been seen, the statistics and so ``want`` freeze; the
  gain reaches that locked value at the slew rate and never changes after that.
- **Limiter**: ``|y| <= LIMITER_KNEE`` (0.85) passes unchanged; above it
  ``|y| -> knee + w tanh((|y| - knee) / w)`` with ``w = LIMITER_CEILING - knee`` (ceiling 0.99): slope 1 at
  the knee (no corner) and ``|y| <= 0.99`` for any input, so nothing reaches full scale.
"""

from __future__ import annotations

import math

import numpy as np

from app.audio.constants import SAMPLE_RATE
from app.audio.timestretch import as_mono_f32

FRAME_S = 0.010
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
        target_rms_db: float = -16.0,
        max_gain_db: float = 12.0,
        lock_s: float = 1.0,
        min_estimate_s: float = 0.5,
        sample_rate: int = SAMPLE_RATE,
        active_floor_db: float = -50.0,
        max_slew_db_per_s: float = 4.0,
        max_hold_s: float = 2.0,
    ) -> None:
        values = {
            "target_rms_db": target_rms_db,
            "max_gain_db": max_gain_db,
            "lock_s": lock_s,
            "min_estimate_s": min_estimate_s,
            "active_floor_db": active_floor_db,
            "max_slew_db_per_s": max_slew_db_per_s,
            "max_hold_s": max_hold_s,
        }
        for name, value in values.items():
            if not (isinstance(value, int | float) and math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        for name in ("max_gain_db", "lock_s", "min_estimate_s", "max_slew_db_per_s", "max_hold_s"):
            if values[name] < 0:
                raise ValueError(f"{name} must be >= 0, got {values[name]!r}")
        if not (isinstance(sample_rate, int) and sample_rate > 0):
            raise ValueError(f"sample_rate must be a positive integer, got {sample_rate!r}")
        self.target_rms_db = float(target_rms_db)
        self.max_gain_db = float(max_gain_db)
        self.sample_rate = sample_rate
        self._frame = max(1, round(FRAME_S * sample_rate))
        frame_s = self._frame / sample_rate
        self._hold_frames = math.ceil(min_estimate_s / frame_s)
        self._max_hold_frames = max(self._hold_frames, math.ceil(max_hold_s / frame_s))
        self._lock_frames = math.ceil(lock_s / frame_s)
        self._slew_db = max_slew_db_per_s * frame_s
        self._active_ms = 10.0 ** (active_floor_db / 10.0)
        # analysis state (frames are [j F, (j+1) F) of the input)
        self._n_in = 0
        self._partial = np.zeros(0, dtype=np.float32)  # samples of the current incomplete frame
        self._sum_ms = 0.0
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
            mean_sq = float(np.mean(np.square(self._partial, dtype=np.float64)))
            self._add_frame_stats(mean_sq, float(np.max(np.abs(self._partial))))
        self._release(self._n_in // self._frame)
        held = np.concatenate(self._held) if self._held else np.zeros(0, dtype=np.float32)
        self._held = []
        return self._apply(held, 0)

    def _want_db(self) -> float:
        """Gain towards the target from the statistics so far, clamped and capped by the peak."""
        if self._n_active == 0:
            return 0.0
        est_db = 10.0 * math.log10(self._sum_ms / self._n_active)
        want = min(max(self.target_rms_db - est_db, -self.max_gain_db), self.max_gain_db)
        if self._peak > 0:
            want = min(want, max(0.0, 20.0 * math.log10(LIMITER_DRIVE / self._peak)))
        return want

    def _add_frame_stats(self, ms: float, peak: float) -> None:
        """Count one frame (mean square ``ms``, largest ``|x|`` ``peak``) unless the statistics are locked."""
        if self._locked:
            return
        self._peak = max(self._peak, peak)
        if ms > self._active_ms:
            self._sum_ms += ms
            self._n_active += 1
        self._locked = self._n_active >= self._lock_frames

    def _analyse(self, x: np.ndarray) -> None:
        """Complete the frames ``x`` finishes, in order: statistics, hold release, next gains."""
        first = self._n_in // self._frame
        self._n_in += len(x)
        if self._settled:
            return
        data = np.concatenate([self._partial, x])
        n_frames = len(data) // self._frame
        frames = data[: n_frames * self._frame].reshape(n_frames, self._frame)
        self._partial = data[n_frames * self._frame :].copy()
        if n_frames == 0:
            return
        mean_sq = np.mean(np.square(frames, dtype=np.float64), axis=1).tolist()  # [n_frames]
        peaks = np.max(np.abs(frames), axis=1).tolist()  # [n_frames]
        for i in range(n_frames):
            j = first + i
            was_active = self._n_active
            self._add_frame_stats(mean_sq[i], peaks[i])
            if self._onset is None and self._n_active > was_active:
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
            gain = g_start + (g_end - g_start) * (((pos % self._frame) + 1) / self._frame)
            self._last_gain = 20.0 * math.log10(float(gain[-1]))
        return soft_limit(x.astype(np.float64) * gain)
