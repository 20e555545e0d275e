"""Streaming stitcher: choose the code windows to decode while codes stream in, and join their audio.

The NeuCodec decoder is non-causal (attention, GroupNorm, convolutions, ISTFT over the whole window),
so the audio of a code depends on its neighbours. Each window is therefore decoded with context on
both sides, the context audio is sliced off, and neighbouring windows are crossfaded.

Schedule (in codes; one code is ``samples_per_token`` samples, ``spt`` below):

- Window k owns codes ``[s_k, e_k)``; ``s_0 = 0``, ``s_{k+1} = e_k``. Its natural length is ``seg_k``:
  ``seg_0 = first_tokens``, ``seg_{k+1} = min(floor(seg_k * growth), max_window_tokens)``, so
  ``e_k = s_k + seg_k``, and it decodes ``codes[lo_k : e_k + future_tokens]`` with
  ``lo_k = s_k - p_k``, ``p_k = min(past_tokens, s_k)``, and keeps its own span.
- With ``buckets`` (decode lengths, context included), the decode length ``D_k = p_k + seg_k + future``
  is replaced by the bucket nearest to it (ties to the smaller) among those that leave the window at
  least one code of its own, and ``e_k = lo_k + bucket - future`` (not under a load that bounds the
  windows: there each window's length is what its round allows). Windows of concurrent streams then
  share a few lengths, so the codec batches them without padding and without changing a sample.
- Window k is decoded as soon as ``e_k + future_tokens`` codes have arrived.
- ``flush()`` decodes the rest, ``codes[lo : n]`` with ``lo = s - p``, as the last window. With buckets,
  ``lo`` moves further left (more past context, never padding) to make ``n - lo`` the smallest bucket
  that fits, when there are enough codes and that adds at most ``LAST_WINDOW_SLACK`` of the natural
  length ``n - s + p`` (re-decoding more to share a batch would cost more than it saves); otherwise the
  length stays ``n - s + p``.
- ``redecode_budget`` b (0: off) replaces that rule: the last window spends on past context what the
  utterance's budget leaves. It decodes ``A = floor(n * (1 + b)) - D`` codes (``D``: what the earlier
  windows decoded), capped at ``n`` and at a full window's ``max_window_tokens + past_tokens +
  future_tokens`` (so the last decode takes no longer than the longest regular one) and never fewer
  than ``n - s + p``; with buckets, the longest bucket within ``LAST_WINDOW_SLACK`` below ``A`` (and
  not below ``n - s + p``) when there is one. A window decodes each of its codes against all the
  others (attention and GroupNorm see the whole window), so a short last window, where the windows
  differ most from a one-shot decode, gains most from the context. The utterance then decodes at
  most ``1 + b`` codes per code emitted whenever the fixed contexts allow it (the bucket slack may
  pass that; the budget replaces it).

Deadlines: a simulated listener (``Playback``) starts playing when the first chunk comes out and
plays in real time; each decode is handed the moment it will have played everything emitted so far
(after a stall, counted from when the late chunk came out); the first window's is None (due now; with a
lead, below: when the listener gets there). The codec serves the earliest deadline first, so a stream
with seconds of audio buffered yields to streams that have none. ``stall_s`` is the time the listener's
buffer was empty before the end.

Deadline cuts (the schedule's ``cuts``): when codes arrive slower than the schedule's windows need (an
LM at a served model's pace), the caller waits for the next codes only ``cut_due_in()`` seconds: until
the listener has ``margin`` of audio left, the larger of ``min_margin_s``, ``margin_factor`` times
this stream's last decode (queueing included, so a loaded codec cuts earlier) and, under a load, the
load's cover times its round of windows as long as this one would be. If no codes came by then,
``cut()`` decodes a window cut at the ``m`` codes that exist: it owns ``[s, m - future_tokens)`` (at
least ``min_cut_tokens`` of its own and ``cut_growth`` times what the window before it owned, else no
cut is due; the default 1 lets a cut window be as long as the one before: an LM at its pace makes codes
only so fast, and waiting for more would leave the listener dry) with the usual past and future context,
and the schedule resumes with the window it cut short (``seg`` unchanged). An LM that sends everything at once
is never cut (the end of its stream comes before any deadline). With cuts the window list depends on
when codes arrived, not on ``n`` alone: the output is chunking-independent only while no cut happens.
The last window's budget counts the codes actually decoded.

Pace: a cut window owns at least ``fewest`` codes (``min_cut_tokens``, or ``cut_growth`` times the window
before it), so after the first window the listener waits for ``fewest`` more codes; an LM at about real
time sends them just as the first window's audio ends, and the listener runs dry while they decode. So
the first chunk of a stream without a listener yet goes out at ``release_at`` (None: when decoded): when,
at the pace the LM kept since its first code, the listener will still have the time of that cut's
decode (``margin_factor`` times the first decode; under a load, its round of such windows) once those
codes exist, at most ``PACE_HOLD_MAX_S`` after the decode. Its listener starts there (the caller holds
the chunk until then). A faster LM, codes that came at once and a later part (``due``) are not held;
nor is an LM slower than ``PACE_HOLD_MIN`` of real time (an embedded LM on a CPU): its listener runs dry
later whatever the first wait, which would only delay its first audio.

Load: the listener plays each window while the next one decodes, and the codec decodes every stream's
windows. ``for_load`` fits the schedule to the codec's measured cost and the streams it serves
(``app.audio.round_cost``: a round of every stream's next window): the first window lengthens until the
round after it is decoded while it plays, and each later window grows only as far as its round can be
decoded while the window before it plays (``STREAM_FIRST_COVER`` to spare). On a fast codec neither
bound binds and the configured schedule stays as it is.

Lead: a later part of a long input (or a later segment of a realtime turn) starts while the listener is
still playing the parts before it, seconds from reaching it. Given ``due`` (when it does), the stitcher
sizes that stream's first window as the window after one that plays for that lead
(``StitchSchedule.lead_window``: ``growth`` times the lead, at most ``max_window_tokens`` and, under a load,
what a round decodes within the lead; never below ``first_tokens``), so a part does not start again from
a small first window (fewer decodes, no short window's seam). Its listener is counted as playing from the
start: the first window's deadline is ``due``, deadline cuts apply to it (an LM at its pace gets the
window cut at the codes that exist before the listener gets there), and audio that comes after ``due``
counts as a stall.

Re-decoded codes: each non-final window decodes ``p + future`` codes it does not emit, the last ``p``
(plus any bucket slack or budget). With the server's defaults (see ``app/core/defaults.py``) an
utterance of 3, 5, 10 or 20 s decodes at most 1.2 codes per code it emits (``bench/stitch_bench.py``
prints the ratios and the seam quality against a one-shot decode).

Joins: at the boundary ``B = e_k * spt`` (samples) a raised-cosine ramp ``0.5 (1 - cos(pi t))`` of
``L + R`` samples blends window k into window k+1 over ``[B - L, B + R)``. The right half lies in window
k's future context, the left half in window k+1's past context::

    X = min(crossfade_samples, shortest_own * spt)  # never wider than the shortest non-final window
    R = min(X - X // 2, future_tokens * spt)         # centred on B as far as the future context allows
    L = min(X - R, past_tokens * spt)                # the rest goes left of B (all of it when future is 0)

Sample bookkeeping: window k emits ``[B_{k-1} - L, B_k - L)`` (the first window ``[0, B_0 - L)``): the
blend of the previous join, then its own body. It holds back its samples ``[B_k - L, B_k + R)`` for the
next join. The last window emits ``[B - L, n * spt)``. So every sample of ``[0, n * spt)`` is emitted
exactly once for any n, and since the window list depends only on n, the output does not depend on
how the codes were split across ``push()`` calls. The last window always has at least
``future_tokens`` codes, so it covers R. (``shortest_own``: the fewest codes a non-final window owns.)
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from app.audio.pace import Pace
from app.audio.playback import Playback
from app.audio.round_cost import RoundCost
from app.core.constants import SAMPLE_RATE, SAMPLES_PER_TOKEN, TOKENS_PER_SECOND

Decode = Callable[[list[int], float | None], Awaitable[np.ndarray]]
"""Decodes a window of T codes to float32 mono audio of shape [T * samples_per_token]; the second
argument is the window's play-out deadline in ``time.monotonic()`` seconds (None: needed now)."""

LAST_WINDOW_SLACK = 0.1  # a last window grows to a bucket only when that adds at most this fraction
PACE_HOLD_MAX_S = 0.3
"""The longest the first audio waits for a slow LM's pace (module docstring, "Pace")."""
PACE_HOLD_MIN = 0.8
"""An LM slower than this share of real time is not held (module docstring, "Pace")."""


@dataclass(frozen=True)
class DeadlineCuts:
    """When a stream cuts a window at the codes that exist (module docstring, "Deadline cuts")."""

    min_margin_s: float = 0.08  # cut when the listener has less than this much audio left ...
    margin_factor: float = 1.5  # ... or less than this many times the stream's last decode
    min_cut_tokens: int = 10  # fewest codes a cut window owns ...
    cut_growth: float = 1.0  # ... and at least this many times what the window before it owned

    def __post_init__(self) -> None:
        ok = self.min_margin_s >= 0 and self.margin_factor >= 0 and self.cut_growth >= 0
        if not (ok and self.min_cut_tokens >= 1):
            raise ValueError(f"bad deadline cuts: {self!r}")


@dataclass(frozen=True)
class StitchSchedule:
    """Window sizes in codes and the crossfade width in samples; see the module docstring."""

    first_tokens: int
    growth: float
    max_window_tokens: int
    future_tokens: int
    past_tokens: int
    crossfade_samples: int
    samples_per_token: int = SAMPLES_PER_TOKEN
    buckets: tuple[int, ...] = ()  # decode lengths in codes, context included; () = natural lengths
    redecode_budget: float = (
        0.0  # the last window takes more past context while at most this share re-decodes
    )
    cuts: DeadlineCuts | None = None  # cut windows at the codes that exist near a deadline; None: never
    load: RoundCost | None = None  # later windows grow only as far as the codec's round allows; None: free
    tokens_per_s: int = TOKENS_PER_SECOND

    def __post_init__(self) -> None:
        ints = {
            "first_tokens": (self.first_tokens, 1),
            "max_window_tokens": (self.max_window_tokens, 1),
            "future_tokens": (self.future_tokens, 0),
            "past_tokens": (self.past_tokens, 0),
            "crossfade_samples": (self.crossfade_samples, 0),
            "samples_per_token": (self.samples_per_token, 1),
            "tokens_per_s": (self.tokens_per_s, 1),
        }
        for name, (value, low) in ints.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if not (isinstance(self.growth, int | float) and math.isfinite(self.growth) and self.growth >= 1):
            raise ValueError(f"growth must be a finite number >= 1, got {self.growth!r}")
        budget = self.redecode_budget
        if not (isinstance(budget, int | float) and not isinstance(budget, bool) and 0 <= budget < math.inf):
            raise ValueError(f"redecode_budget must be a finite number >= 0, got {budget!r}")
        if any(not isinstance(b, int) or isinstance(b, bool) or b < 1 for b in self.buckets) or list(
            self.buckets
        ) != sorted(set(self.buckets)):
            raise ValueError(f"buckets must be increasing positive integers, got {self.buckets!r}")
        if self.max_window_tokens < self.first_tokens:
            raise ValueError(
                f"max_window_tokens ({self.max_window_tokens}) must be >= first_tokens ({self.first_tokens})"
            )

    @classmethod
    def from_seconds(
        cls,
        playback_speed: float,
        playback_overlap_speed: float,
        growth: float,
        max_chunk_s: float,
        past_context_s: float,
        crossfade_ms: float,
        tokens_per_s: int = TOKENS_PER_SECOND,
        sample_rate: int = SAMPLE_RATE,
        buckets: tuple[int, ...] = (),
        *,
        redecode_budget: float = 0.0,
        cuts: DeadlineCuts | None = None,
    ) -> StitchSchedule:
        """Build a schedule from the request/settings values, given in seconds of audio.

        ``playback_speed`` is the first window (``max(1, round(s * tokens_per_s))`` codes),
        ``playback_overlap_speed`` the future context, ``past_context_s`` the past context, and windows
        grow by ``growth`` up to ``max(first, max_chunk_s)``; ``buckets`` are decode lengths in codes;
        ``redecode_budget`` the share of an utterance the last window may re-decode; ``cuts`` when a window
        is cut short at a deadline. Raises ValueError on nonsense.
        """
        values = {
            "playback_speed": playback_speed,
            "playback_overlap_speed": playback_overlap_speed,
            "max_chunk_s": max_chunk_s,
            "past_context_s": past_context_s,
            "crossfade_ms": crossfade_ms,
        }
        for name, value in values.items():
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if playback_speed <= 0 or max_chunk_s <= 0:
            raise ValueError("playback_speed and max_chunk_s must be > 0")
        if tokens_per_s <= 0 or sample_rate <= 0 or sample_rate % tokens_per_s:
            raise ValueError(f"sample_rate ({sample_rate}) must be a positive multiple of tokens_per_s")
        first = max(1, round(playback_speed * tokens_per_s))
        return cls(
            first_tokens=first,
            growth=growth,
            max_window_tokens=max(first, round(max_chunk_s * tokens_per_s)),
            future_tokens=round(playback_overlap_speed * tokens_per_s),
            past_tokens=round(past_context_s * tokens_per_s),
            crossfade_samples=round(sample_rate * crossfade_ms / 1000),
            samples_per_token=sample_rate // tokens_per_s,
            buckets=tuple(buckets),
            redecode_budget=redecode_budget,
            cuts=cuts,
            tokens_per_s=tokens_per_s,
        )

    def first_for(self, load: RoundCost) -> int | None:
        """Fewest codes the first window may own under ``load`` (``app.audio.round_cost``); None when the
        codec cannot keep that many streams fed whatever the window."""
        return load.first_window(self.past_tokens + self.future_tokens, self.held_bound, self.tokens_per_s)

    def for_load(self, load: RoundCost | None) -> StitchSchedule:
        """This schedule fitted to ``load`` (module docstring, "Load"; None: unchanged): later windows
        grow no further than their round allows, and the first window is lengthened to
        ``first_for(load)``, at most ``max_window_tokens`` (streams that start under the same load share
        its length, and batch); windows keep their natural lengths, without buckets. A load that bounds
        no window (a fast codec) leaves the schedule as it is."""
        if load is None:
            return self
        need = self.first_for(load)
        if not self._bounded_by(load, need):
            return self
        first = self.max_window_tokens if need is None else min(self.max_window_tokens, need)
        return dataclasses.replace(self, first_tokens=max(first, self.first_tokens), buckets=(), load=load)

    def _bounded_by(self, load: RoundCost, need: int | None) -> bool:
        """Whether ``load`` lengthens the first window (to ``need``, its ``first_for``) or keeps a later one
        shorter than ``growth`` times the one before (the round's bound grows linearly with the window
        before it, so it is enough to look at the first window and at the slope)."""
        if need is None or need > self.first_tokens:
            return True
        context, plays = self.past_tokens + self.future_tokens, self.first_tokens - self.held_bound
        first_fits = load.fit(plays, context, self.tokens_per_s) >= min(
            self.max_window_tokens, math.floor(self.first_tokens * self.growth + 1e-9)
        )
        return not (first_fits and load.slope(self.tokens_per_s) >= self.growth)

    @property
    def first_own(self) -> int:
        """Codes the first window owns (``first_tokens`` unless buckets moved its end)."""
        return self.window(0, self.first_tokens)[1]

    @property
    def shortest_own(self) -> int:
        """Fewest codes a non-final window owns: ``first_tokens`` without buckets; with buckets a later
        window can own fewer (its past context takes more of its bucket)."""
        shortest, start, seg = self.first_own, 0, self.first_tokens
        while True:
            _, end, _ = self.window(start, seg)
            shortest = min(shortest, end - start)
            following = self.next_window(seg)
            if start >= self.past_tokens and following == seg:  # every later window is this one again
                return shortest
            start, seg = end, following

    @property
    def held_bound(self) -> int:
        """Most codes a window holds back for its join (``crossfade_left``, rounded up), bounded without the
        windows' lengths (which depend on it under a load)."""
        spt, width = self.samples_per_token, self.crossfade_samples
        left = min(width - min(width - width // 2, self.future_tokens * spt), self.past_tokens * spt)
        return math.ceil(left / spt)

    @property
    def crossfade_right(self) -> int:
        """R: samples of a join right of the boundary, covered by the left window's future context."""
        width = min(self.crossfade_samples, self.shortest_own * self.samples_per_token)
        return min(width - width // 2, self.future_tokens * self.samples_per_token)

    @property
    def crossfade_left(self) -> int:
        """L: samples of a join left of the boundary, covered by the right window's past context."""
        width = min(self.crossfade_samples, self.shortest_own * self.samples_per_token)
        return min(width - self.crossfade_right, self.past_tokens * self.samples_per_token)

    def window(self, start: int, seg: int) -> tuple[int, int, int]:
        """``(lo, end, stop)`` of the non-final window starting at ``start`` of natural length ``seg``:
        it decodes ``[lo, stop)`` and owns ``[start, end)``; ``stop = end + future_tokens``."""
        past = min(self.past_tokens, start)
        length = past + seg + self.future_tokens
        fits = [b for b in self.buckets if b > past + self.future_tokens]
        if fits:
            length = min(fits, key=lambda b: (abs(b - length), b))
        lo = start - past
        return lo, lo + length - self.future_tokens, lo + length

    def last_window_lo(self, start: int, n_codes: int, decoded: int | None = None) -> int:
        """First code decoded by the final window, which owns ``[start, n_codes)`` (module docstring);
        ``decoded``: what the earlier windows decoded (None: the schedule's windows before ``start``)."""
        natural = n_codes - start + min(self.past_tokens, start)
        if not self.redecode_budget:
            top = min(n_codes, natural * (1 + LAST_WINDOW_SLACK))
            return n_codes - next((b for b in self.buckets if natural <= b <= top), natural)
        before = self.decoded_before(start) if decoded is None else decoded
        allowed = math.floor(n_codes * (1 + self.redecode_budget) + 1e-9) - before
        longest = self.max_window_tokens + self.past_tokens + self.future_tokens  # a full window's decode
        top = max(natural, min(n_codes, allowed, longest))
        below = [b for b in self.buckets if max(natural, top / (1 + LAST_WINDOW_SLACK)) <= b <= top]
        return n_codes - (below[-1] if below else top)

    def decoded_before(self, start: int) -> int:
        """Codes the non-final windows decode before the window that starts at ``start``."""
        total, begin, seg = 0, 0, self.first_tokens
        while begin < start:
            lo, end, stop = self.window(begin, seg)
            total += stop - lo
            begin, seg = end, self.next_window(seg)
        return total

    def next_window(self, seg: int) -> int:
        """Length in codes of the window after one of ``seg`` codes: ``growth`` times it, at most
        ``max_window_tokens`` and, under a load, what its round allows (never shorter than ``seg``)."""
        return max(seg, self._grown(seg, seg - self.held_bound))  # it plays its codes less what it holds

    def lead_window(self, lead_s: float) -> int:
        """Codes the first window may own when a listener already playing reaches it in ``lead_s`` seconds
        (a later part of a long input; module docstring, "Lead"): as long as the window after one that
        plays ``lead_s``, at least ``first_tokens``."""
        plays = max(0, math.floor(lead_s * self.tokens_per_s + 1e-9))
        return max(self.first_tokens, self._grown(plays, plays))

    def _grown(self, seg: int, plays: int) -> int:
        """``growth`` times ``seg`` codes, at most ``max_window_tokens`` and, under a load, what a round
        decodes while ``plays`` codes play."""
        # The epsilon keeps products like 10 * 1.1 = 11.000000000000002 (or just below) on their integer.
        grown = min(self.max_window_tokens, math.floor(seg * self.growth + 1e-9))
        if self.load is not None:
            context = self.past_tokens + self.future_tokens
            grown = min(grown, self.load.fit(plays, context, self.tokens_per_s))
        return grown

    def windows(self, n_codes: int) -> list[tuple[int, int]]:
        """Own spans ``[s, e)`` of the windows that ``n_codes`` codes are cut into (the last by flush)."""
        return [(start, end) for start, end, _, _ in self.plan(n_codes)]

    def plan(self, n_codes: int) -> list[tuple[int, int, int, int]]:
        """``(start, end, lo, stop)`` of every window for ``n_codes`` codes: owned ``[start, end)``,
        decoded ``[lo, stop)``; the last one is the one ``flush()`` decodes."""
        spans: list[tuple[int, int, int, int]] = []
        start, seg = 0, self.first_tokens
        while True:
            lo, end, stop = self.window(start, seg)
            if stop > n_codes:
                break
            spans.append((start, end, lo, stop))
            start, seg = end, self.next_window(seg)
        if start < n_codes:
            spans.append((start, n_codes, self.last_window_lo(start, n_codes), n_codes))
        return spans


class Stitcher:
    """Turns a stream of codes into float32 mono audio chunks by windowed decoding (module docstring).

    ``feed``/``push`` and ``flush`` must be used one at a time (one consumer per stream); the only thing
    they wait on is ``decode``. After ``flush`` the stitcher is finished. ``clock`` (``time.monotonic``)
    and ``sample_rate`` turn emitted samples into play-out deadlines; the schedule's ``cuts`` (None: off)
    cut windows short when the listener would otherwise run dry. ``load`` (None: the schedule as given)
    says the codec's load now: each window, the first included until it is decoded, is sized by
    ``schedule.for_load(load())`` at the moment it is considered (module docstring, "Load"), so streams
    that arrive together size their windows for all of them. ``due`` (None: no listener yet) says when a
    listener who is already playing reaches this stream's first sample (a later part of a long input):
    the first window is sized by that lead, and its deadline and cuts count from it (module docstring,
    "Lead"). The joins keep the schedule's crossfade.
    """

    def __init__(
        self,
        decode: Decode,
        schedule: StitchSchedule,
        *,
        clock: Callable[[], float] = time.monotonic,
        sample_rate: int = SAMPLE_RATE,
        load: Callable[[], RoundCost | None] | None = None,
        due: Callable[[], float | None] | None = None,
    ) -> None:
        self._decode = decode
        self._base = schedule
        self._load = load
        self._due = due
        self._schedule = schedule  # the base, fitted to the load when the last window was considered
        self._clock = clock
        self._cuts = schedule.cuts
        self.playback = Playback(sample_rate)
        self._last_decode_s = 0.0  # how long the last decode call took (s), queueing included
        self.decoded = 0  # codes decoded so far
        self.cut_windows = 0  # windows cut short at a deadline
        self._last_own = 0  # codes the last decoded window owned
        self._left = schedule.crossfade_left
        self._right = schedule.crossfade_right
        width = self._left + self._right
        t = (np.arange(width) + 0.5) / max(width, 1)
        self._ramp = (0.5 * (1.0 - np.cos(np.pi * t))).astype(np.float32)  # [L + R], rises 0 -> 1
        self._codes: list[int] = []
        self._start = 0  # s: first code of the next window
        self._seg = schedule.first_tokens  # length of the next window
        self._planned: int | None = None  # length of the last window decoded as planned (not cut)
        self._held: np.ndarray | None = None  # [L + R]: last window's samples around s * spt
        self._finished = False
        self._pace = Pace()  # the LM's codes as they came
        self.release_at: float | None = None  # when the first chunk goes out (None: when decoded)

    async def feed(self, codes: list[int]) -> AsyncGenerator[np.ndarray, None]:
        """Add codes; yield the chunk of each window that became decodable as soon as it is decoded (so
        the first chunk goes out before the next window is decoded, even when many codes come at once)."""
        if self._finished:
            raise RuntimeError("push() after flush()")
        if codes:
            self._pace.arrived(len(codes), self._clock())
        self._codes.extend(codes)
        while True:
            self._fit()
            lo, end, stop = self._schedule.window(self._start, self._seg)
            if len(self._codes) < stop:
                return
            chunk = await self._window(lo, self._start, end, stop, last=False)
            self._planned = self._seg
            self._start, self._seg = end, self._schedule.next_window(self._seg)
            if chunk.size:
                yield chunk

    def _fit(self) -> None:
        """Under a load: the schedule for the codec's load now, and the next window's length by it; before
        the first planned window of a stream a listener reaches at ``due``: that window's length by the
        lead."""
        if self._load is not None:
            self._schedule = self._base.for_load(self._load())
        planned, ends, schedule = self._planned, self._listener_end(), self._schedule
        if planned is None and self._due is not None and ends is not None:
            self._seg = schedule.lead_window(ends - self._clock())
        elif self._load is not None:
            self._seg = schedule.first_tokens if planned is None else schedule.next_window(planned)

    def _listener_end(self) -> float | None:
        """When the listener will have played everything emitted so far; before the first chunk, when it
        reaches this stream (``due``); None while no listener plays."""
        ends = self.playback.end
        return self._due() if ends is None and self._due is not None else ends

    def cut_due_in(self) -> float | None:
        """Seconds until a window should be cut at the codes that exist (0: now), or None while no cut
        can happen (cuts off, nothing played yet, or fewer than ``min_cut_tokens`` codes of its own)."""
        cuts, ends = self._cuts, self._listener_end()
        if cuts is None or ends is None or self._finished:
            return None
        fewest = max(cuts.min_cut_tokens, math.ceil(cuts.cut_growth * self._last_own - 1e-9))
        if len(self._codes) - self._schedule.future_tokens - self._start < fewest:
            return None
        margin = max(cuts.min_margin_s, cuts.margin_factor * self._last_decode_s)
        load = self._schedule.load
        if load is not None:  # or what its round would take, decoding what exists now
            decoded = len(self._codes) - self._start + min(self._schedule.past_tokens, self._start)
            margin = max(margin, load.cover * load.seconds(decoded))
        return max(0.0, ends - margin - self._clock())

    async def cut(self) -> list[np.ndarray]:
        """Decode the next window cut at the codes that exist (module docstring, "Deadline cuts"); its
        chunk, or nothing when no cut can happen. The caller calls it when ``cut_due_in()`` has passed
        while no codes came."""
        if self.cut_due_in() is None:
            return []
        stop = len(self._codes)
        end = stop - self._schedule.future_tokens
        lo = self._start - min(self._schedule.past_tokens, self._start)
        chunk = await self._window(lo, self._start, end, stop, last=False)
        self._start = end
        self.cut_windows += 1
        return [chunk] if chunk.size else []

    @property
    def stall_s(self) -> float:
        """Seconds the simulated listener's buffer stood empty before the end (module docstring)."""
        return self.playback.stall_s

    async def push(self, codes: list[int]) -> list[np.ndarray]:
        """Add codes; return the chunks of every window that became decodable (often none)."""
        return [chunk async for chunk in self.feed(codes)]

    def deadline(self) -> float | None:
        """When the listener will have played every sample emitted so far (before the first: when it
        reaches this stream, None without ``due``)."""
        return self._listener_end()

    async def flush(self) -> list[np.ndarray]:
        """Decode the remaining codes as the last window and return everything not yet emitted."""
        if self._finished:
            return []
        self._finished = True
        n = len(self._codes)
        if n > self._start:
            varied = self.cut_windows or self._load is not None or self._due is not None  # not the plan's
            lo = self._schedule.last_window_lo(self._start, n, self.decoded if varied else None)
            chunk = await self._window(lo, self._start, n, n, last=True)
        elif self._held is not None:  # n == s: only when future_tokens == 0, so R == 0
            chunk = self._held[: self._left].copy()
        else:
            return []
        self._held = None
        self._codes = []
        return [chunk] if chunk.size else []

    async def _window(self, lo: int, start: int, end: int, stop: int, last: bool) -> np.ndarray:
        """Decode codes ``[lo, stop)`` and return the samples the window owning ``[start, end)`` emits.

        The last window (``stop == end``) emits up to its end and holds nothing back.
        """
        spt = self._schedule.samples_per_token
        window = self._codes[lo:stop]
        called = self._clock()
        audio = np.asarray(await self._decode(window, self.deadline()), dtype=np.float32)
        self._last_decode_s = self._clock() - called
        self.decoded += len(window)
        if audio.shape != (len(window) * spt,):
            raise ValueError(
                f"decode of {len(window)} codes returned shape {audio.shape}, expected ({len(window) * spt},)"
            )
        self._last_own = end - start
        own = (start - lo) * spt  # index of sample start * spt in audio
        own_end = own + (end - start) * spt
        pieces = []
        if self._held is None:
            body_start = own
        else:  # blend the held samples [B - L, B + R) with this window's, B = start * spt
            new = audio[own - self._left : own + self._right]
            pieces.append(self._held + self._ramp * (new - self._held))  # exact where new == held
            body_start = own + self._right
        if last:
            pieces.append(audio[body_start:])
            self._held = None
        else:
            pieces.append(audio[body_start : own_end - self._left])
            self._held = audio[own_end - self._left : own_end + self._right].copy()
        chunk = np.concatenate(pieces)
        if chunk.size:
            out_at = self._clock()
            if self._listener_end() is None and not last:  # the first audio: no listener plays yet
                self.release_at = self._paced_release(start, end, chunk.size, out_at)
                out_at = out_at if self.release_at is None else self.release_at
            self.playback.reaches(self._listener_end())  # before the first chunk: a listener already playing
            self.playback.emit(chunk.size, out_at)
        return chunk

    def _paced_release(self, start: int, end: int, samples: int, now: float) -> float | None:
        """When the first chunk (``samples`` of the window owning ``[start, end)``, decoded at ``now``) goes
        out so that its listener still has the time of a decode left when the LM, at the pace it kept so
        far, has sent the codes of the shortest window a cut may make after it (module docstring, "Pace");
        None: at once (no cuts, no pace measured, an LM far slower than real time, or the codes come in
        time)."""
        cuts, pace = self._cuts, self._pace.rate  # codes a second since the first
        if cuts is None or pace is None:
            return None
        fewest = max(cuts.min_cut_tokens, math.ceil(cuts.cut_growth * (end - start) - 1e-9))
        context = self._schedule.past_tokens + self._schedule.future_tokens
        missing = end + fewest + self._schedule.future_tokens - len(self._codes)
        if missing <= 0 or pace < PACE_HOLD_MIN * self._schedule.tokens_per_s:
            return None
        # the cut's decode: under a load its round (the first decode queued behind the other streams' first
        # windows, a wait their lengths already cover), else 1.5 times the first decode
        load, decode_s = self._schedule.load, cuts.margin_factor * self._last_decode_s
        margin = decode_s if load is None else load.cover * load.seconds(fewest + context)
        release = self._pace.last_at + missing / pace + margin - samples / self.playback.sample_rate
        return None if release <= now else min(release, now + PACE_HOLD_MAX_S)
