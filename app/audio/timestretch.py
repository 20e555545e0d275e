"""WSOLA speaking rate: change the tempo of a PCM stream and keep its pitch.

Waveform-similarity overlap-add (SoundTouch's speech settings). The output is built from blocks of
``seq`` input samples copied whole (so the pitch is kept), laid ``hop_out`` apart and joined by a
raised-cosine crossfade of ``ov`` samples. At 24 kHz::

    seq = 40 ms (960)    ov = 8 ms (192)    hop_out = seq - ov (768)    hop_in = hop_out * rate
    S = 7.5 ms (180): the search reaches S samples either side of the nominal input position
    L = 16 ms (384): the length compared when matching a candidate, at least one pitch period of a
        low voice (62.5 Hz); a window shorter than a period (like the 8 ms crossfade) can lock onto
        the wrong phase of the period and leave slightly irregular periods at the joins

Block k (output samples ``[k hop_out, (k+1) hop_out)``) starts at input sample ``s_k``: ``s_0 = 0``;
for k >= 1 the nominal position is ``p_k = round(k hop_in)`` and ``s_k`` is the candidate in
``[max(0, p_k - S), p_k + S]`` that maximises ``ncc - 0.1 t^2``, where ``ncc`` is the normalised
cross-correlation of the candidate's first ``L`` samples ``x[s : s + L]`` with the audio that would
naturally follow the previous block (``x[s_{k-1} + hop_out : s_{k-1} + hop_out + L]``, whose first
``ov`` samples are the previous block's tail) and ``t = (s - p_k) / S`` in [-1, 1] breaks near-ties
towards the nominal position. Block k emits the crossfade of that tail
(``x[s_{k-1} + hop_out : s_{k-1} + seq]``) into ``x[s_k : s_k + ov]`` followed by
``x[s_k + ov : s_k + hop_out]``; block 0 emits ``x[0 : hop_out]``.

Length: an input of n samples gives exactly ``round(n / rate)`` output samples (Python's round,
half to even). Streaming: block k runs once ``p_k + S + seq`` input samples and
``(k+1) hop_out * rate`` input samples have arrived (lookahead about seq + S, 47.5 ms, plus under one
``hop_in``), so a pushed block never ends past ``round(n / rate)`` for any final n. The compared
continuation of block k - 1 ends at ``s_{k-1} + hop_out + L <= p_k + S + hop_out + L - hop_in + 1``,
within that lookahead whenever ``L <= ov + hop_in - 1`` (24 ms at rate 0.5), so the longer match window
adds no latency; ``_ready`` still checks it. ``flush()`` runs
the remaining blocks with the search window clamped to ``s <= max(n - seq, 0)`` so the last blocks
reuse real audio from the end of the input, reads past the input as zeros (only when n < seq), and
cuts at ``round(n / rate)``. The clamp never binds for a block that ran during streaming, so each
block is the same function of the whole input however it was chunked, and the output is identical for
any chunking. Rate 1.0 is an exact bypass (the output samples are the input samples).
"""

from __future__ import annotations

import math

import numpy as np

from app.audio.pcm import as_mono_f32
from app.core.constants import SAMPLE_RATE

MIN_RATE = 0.5
MAX_RATE = 2.0
_SEQ_S = 0.040
_OVERLAP_S = 0.008
_HALF_SEEK_S = 0.0075
_MATCH_S = 0.016  # compared length L: one period of a 62.5 Hz voice
_OFFSET_PENALTY = 0.1  # score = ncc - penalty * t^2, t the offset from the nominal position in [-1, 1]


class TimeStretch:
    """Streaming WSOLA: float32 [N] chunks in, float32 chunks out; ``round(n / rate)`` samples in all.

    ``rate`` > 1 speaks faster (shorter output), < 1 slower; allowed range [0.5, 2.0].
    """

    def __init__(self, rate: float, sample_rate: int = SAMPLE_RATE) -> None:
        if not (isinstance(rate, int | float) and math.isfinite(rate) and MIN_RATE <= rate <= MAX_RATE):
            raise ValueError(f"rate must be between {MIN_RATE} and {MAX_RATE}, got {rate!r}")
        if not (isinstance(sample_rate, int) and sample_rate > 0):
            raise ValueError(f"sample_rate must be a positive integer, got {sample_rate!r}")
        self.rate = float(rate)
        self.sample_rate = sample_rate
        self._bypass = self.rate == 1.0
        self._seq = round(_SEQ_S * sample_rate)
        self._ov = max(1, round(_OVERLAP_S * sample_rate))
        self._seek = round(_HALF_SEEK_S * sample_rate)
        self._hop_out = self._seq - self._ov
        self._hop_in = self._hop_out * self.rate
        self._match = max(self._ov, round(_MATCH_S * sample_rate))
        offset = np.arange(-self._seek, self._seek + 1) / max(self._seek, 1)
        self._penalty = _OFFSET_PENALTY * offset * offset  # for the unclamped window, [2 S + 1]
        ramp = 0.5 * (1.0 - np.cos(np.pi * (np.arange(self._ov) + 0.5) / self._ov))
        self._fade_in = ramp.astype(np.float32)  # weights of the new block's head, [ov]
        self._fade_out = (1.0 - ramp).astype(np.float32)  # weights of the previous tail, [ov]
        self._buf = np.zeros(0, dtype=np.float32)  # input samples [buf_start, n_in)
        self._buf_start = 0
        self._n_in = 0
        self._k = 0  # next block
        self._tail = np.zeros(0, dtype=np.float32)  # previous block's tail, [ov]
        self._prev_start = 0  # s_{k-1}, the input start of the previous block
        self._flushed = False

    def push(self, pcm: np.ndarray) -> np.ndarray:
        """Take a chunk [N]; return the output blocks it completes (float32, possibly empty)."""
        if self._flushed:
            raise RuntimeError("push() after flush()")
        x = as_mono_f32(pcm)
        if self._bypass:
            return x.copy()
        self._buf = np.concatenate([self._buf, x])
        self._n_in += len(x)
        out = []
        while self._ready(self._k):
            out.append(self._block(self._k, final_n=None))
            self._k += 1
        self._trim()
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)

    def flush(self) -> np.ndarray:
        """End of input: return the remaining output, so the total is ``round(n / rate)`` samples."""
        if self._flushed:
            raise RuntimeError("flush() called twice")
        self._flushed = True
        if self._bypass:
            return np.zeros(0, dtype=np.float32)
        n_out = round(self._n_in / self.rate)
        emitted = self._k * self._hop_out
        out = []
        while self._k * self._hop_out < n_out:
            out.append(self._block(self._k, final_n=self._n_in))
            self._k += 1
        rest = np.concatenate(out) if out else np.zeros(0, dtype=np.float32)
        return rest[: n_out - emitted]

    def _nominal(self, k: int) -> int:
        return round(k * self._hop_in)

    def _ready(self, k: int) -> bool:
        """Block k can run before the end of input: its search window and its whole output are due."""
        enough_audio = self._nominal(k) + self._seek + self._seq <= self._n_in
        if k > 0:  # the previous block's compared continuation (never binds at the default sizes)
            enough_audio = enough_audio and self._prev_start + self._hop_out + self._match <= self._n_in
        return enough_audio and (k + 1) * self._hop_out <= self._n_in / self.rate

    def _take(self, start: int, stop: int) -> np.ndarray:
        """Input samples [start, stop) as float32, zeros past the end of what has arrived."""
        a, b = start - self._buf_start, stop - self._buf_start
        seg = self._buf[a:b]
        if len(seg) < b - a:
            seg = np.concatenate([seg, np.zeros(b - a - len(seg), dtype=np.float32)])
        return seg

    def _search(self, k: int, final_n: int | None) -> int:
        """Start of block k (k >= 1): the best match for the held tail around the nominal position."""
        p = self._nominal(k)
        lo, hi = max(0, p - self._seek), p + self._seek
        if final_n is not None:
            hi = min(hi, max(final_n - self._seq, 0))
            lo = min(lo, hi)
        m = self._match
        region = self._take(lo, hi + m).astype(np.float64)  # candidates' heads, [hi - lo + m]
        follow = self._prev_start + self._hop_out
        ref = self._take(follow, follow + m).astype(np.float64)  # what follows block k - 1, [m]
        corr = np.correlate(region, ref, mode="valid")  # [hi - lo + 1]
        cumulative = np.cumsum(region * region)
        head_energy = cumulative[m - 1 :].copy()  # energy of region[i : i + m], [hi - lo + 1]
        head_energy[1:] -= cumulative[:-m]
        ncc = corr / np.sqrt(np.maximum(head_energy, 0.0) * float(ref @ ref) + 1e-12)
        if lo == p - self._seek and hi == p + self._seek:
            penalty = self._penalty
        else:  # clamped at the start or the end of the input
            offset = (np.arange(lo, hi + 1) - p) / max(self._seek, 1)
            penalty = _OFFSET_PENALTY * offset * offset
        return lo + int(np.argmax(ncc - penalty))

    def _block(self, k: int, final_n: int | None) -> np.ndarray:
        """Output samples [k hop_out, (k+1) hop_out) as float32 [hop_out]; keeps block k's tail."""
        start = 0 if k == 0 else self._search(k, final_n)
        seg = self._take(start, start + self._seq)  # [seq]
        ov, hop = self._ov, self._hop_out
        if k == 0:
            out = seg[:hop].copy()
        else:
            joined = self._tail * self._fade_out + seg[:ov] * self._fade_in
            out = np.concatenate([joined, seg[ov:hop]])
        self._tail = seg[hop:].copy()
        self._prev_start = start
        return out

    def _trim(self) -> None:
        """Drop input that no later block can read: before the next search window, before the previous
        block's compared continuation and before n - seq."""
        lowest = min(self._nominal(self._k) - self._seek, self._prev_start + self._hop_out)
        keep_from = max(0, min(lowest, self._n_in - self._seq))
        if keep_from > self._buf_start:
            self._buf = self._buf[keep_from - self._buf_start :]
            self._buf_start = keep_from
