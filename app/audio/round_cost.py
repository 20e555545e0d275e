"""How long the codec takes for one round of windows, and the window lengths that keep every listener fed.

The codec is shared by every stream of the process. Under load its decodes come in *rounds*: the next
window of each of ``streams`` streams, batched (on a CPU the decoder streams its weights from memory
once per call, a fixed cost, then pays per code). A round whose windows decode ``D`` codes each takes

    R(D) = fixed_s + per_code_s * streams * D                                   (seconds)

A stream's window k owns ``W_k`` codes and plays ``W_k / tps`` seconds (``tps`` codes a second). The
next window must be decoded while this one plays, with ``cover`` to spare (a round may wait behind
another one, and decode times jitter):

    cover * R(W_{k+1} + ctx) <= W_k / tps        ctx: the past and future context a window decodes

so a window may grow to at most

    fit(W_k) = floor((W_k / (tps * cover) - fixed_s) / (per_code_s * streams)) - ctx

and the first window, which plays ``F - held`` codes before the second is decoded (``held``: the codes
it holds back for the first crossfade), is long enough for the second to be ``GROWTH`` times longer:

    cover * R(GROWTH * F + ctx) <= (F - held) / tps
    F >= (cover * R(ctx) + held / tps) / (1 / tps - cover * per_code_s * streams * GROWTH)

so ``fit(F) >= GROWTH * F`` and the windows grow from there. When the denominator is not positive no
first window works: the codec cannot keep ``streams`` real-time streams fed with windows that grow
(``first_window`` returns None), which is what the admission's viability check refuses before it
happens.

A round is one decode when the codec batches all its windows: they fit one batch (on a CPU, windows
of any lengths packed, ``CODEC_CPU_BATCH_CODES`` codes; on an accelerator windows of one length, as
streams that start under the same load have; at most ``MAX_BATCH_SIZE`` windows). A round split over
several batches pays ``fixed_s`` once per batch, which this model does not count; the default batch
holds 16 streams' windows of 64 codes, 8 of 128.

The figures come from the codec's measured cost (``app.observability.capacity.DecodeCost``) and the
number of streams being served; on a fast codec (an accelerator) ``F`` is below the configured first
window and ``fit`` above the configured growth, so neither changes anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GROWTH = 1.5
"""The first window is long enough for the window after it to be this many times longer: windows that
could only stay as long as the first would each pay a decode's fixed cost and context for little audio."""


@dataclass(frozen=True)
class RoundCost:
    """One codec round: ``fixed_s + per_code_s * streams * codes`` seconds, kept ``cover`` times over."""

    fixed_s: float
    per_code_s: float
    streams: int
    cover: float

    def __post_init__(self) -> None:
        finite = all(math.isfinite(v) for v in (self.fixed_s, self.per_code_s, self.cover))
        positive = self.fixed_s >= 0 and self.per_code_s >= 0 and self.cover > 0 and self.streams >= 1
        if not (finite and positive):
            raise ValueError(f"bad round cost: {self!r}")

    def seconds(self, codes: int) -> float:
        """Seconds one round takes when every stream's window decodes ``codes`` codes."""
        return self.fixed_s + self.per_code_s * self.streams * codes

    def fit(self, own: int, context: int, tokens_per_s: int) -> int:
        """Most codes the window after one owning ``own`` codes may own (module docstring: ``fit``)."""
        spare = own / (tokens_per_s * self.cover) - self.fixed_s
        per_code = self.per_code_s * self.streams
        if per_code <= 0:
            return own if spare < 0 else 2**31
        return math.floor(spare / per_code + 1e-9) - context

    def slope(self, tokens_per_s: int) -> float:
        """How many times longer each window may be than the one before, less a constant (``fit``'s slope):
        how many times over, with ``cover`` to spare, the codec keeps the streams fed; inf for a codec
        that costs nothing per code."""
        per_code = tokens_per_s * self.cover * self.per_code_s * self.streams
        return math.inf if per_code <= 0 else 1 / per_code

    def first_window(self, context: int, held: int, tokens_per_s: int) -> int | None:
        """Fewest codes a first window may own so that a second one ``GROWTH`` times longer is decoded while
        it plays (module docstring: ``F``); None when no length works at this load."""
        room = 1 / tokens_per_s - self.cover * self.per_code_s * self.streams * GROWTH
        if room <= 0:
            return None
        need = self.cover * self.seconds(context) + held / tokens_per_s
        return max(1, math.ceil(need / room - 1e-9))
