"""A stop schedule planted in a random Qwen3-style LM, for the tiny test and demo checkpoints of any
family: one hand-set attention head whose output says how long ago the last marker token was, which a
family's stop logit reads, so that a random model ends an utterance by itself after a few seconds.

**How the head counts** (``stop_head``). Three residual dimensions are reserved: ``CONST_DIM`` (1 in
every token's embedding), ``MARKER_DIM`` (set in the marker token's embedding only: here
``<|speech_start|>``) and ``READOUT_DIM`` (what the head writes; no other layer writes to these three).
The head's query and its keys are constant directions (they read only ``CONST_DIM`` and ``MARKER_DIM``,
and Qwen3's q/k RMSNorm removes every magnitude), placed in two RoPE pairs of the head: in the slow pair
(period of thousands of positions) the score of a key ``d`` positions back is ``a cos(phase + f d)``,
which falls steadily with ``d`` over the whole window, so the softmax weights recent positions
(``exp(-decay * d)`` near the query); in the slowest pair (practically position-free) a marker key earns
a ``bonus``. The weight on the most recent marker is then about ``1 / (1 + K exp(decay * n - bonus))``
with ``n`` the codes since it and ``K = 1 / (1 - exp(-decay))`` the recency sum of the other tokens:
it depends on ``n`` only, not on how long the prompt is (older markers, further back, weigh less). The
values read ``before`` on the marker and ``after`` on other tokens (plus a little per-token jitter that
spreads the end between requests), so ``READOUT_DIM`` moves from ``before`` to ``after`` as the marker
fades, and the stop token's output row turns that into a logit from about -30 to about +30.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

CONST_DIM, MARKER_DIM, READOUT_DIM = 0, 1, 2
RESERVED_DIMS = [CONST_DIM, MARKER_DIM, READOUT_DIM]


def free_dims(hidden: int) -> list[int]:
    """The residual dimensions the stop schedule leaves to the random weights."""
    return [i for i in range(hidden) if i not in RESERVED_DIMS]


@dataclass(frozen=True)
class StopSchedule:
    """The planted stop head's numbers (module docstring): ``decay`` per position and ``bonus`` set when
    the stop becomes likely (the marker's weight halves near ``(bonus - ln K) / decay`` positions),
    ``phase`` where the slow RoPE pair starts on its cosine, ``before``/``after`` the head's output on
    the marker alone and with it faded, ``jitter`` the spread of a token's value around ``after``."""

    decay: float
    bonus: float
    before: float = -1.5
    after: float = 1.5
    jitter: float = 0.0
    phase: float = 0.8


@dataclass(frozen=True)
class HeadShape:
    """The attention layer the stop head lives in (its head 0; every other head is left silent)."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    rope_theta: float
    max_positions: int


def stop_head(
    schedule: StopSchedule,
    shape: HeadShape,
    plain_level: float,
    marker_level: float,
    jitter_level: float,
    jitter_dims: list[int],
    generator: torch.Generator,
) -> dict[str, torch.Tensor]:
    """The weights of a Qwen3 attention layer (``q_proj`` [heads*D, hidden], ``k_proj``/``v_proj``
    [kv_heads*D, hidden], ``o_proj`` [hidden, heads*D], ``q_norm``/``k_norm`` [D]) whose head 0 is the
    stop head of ``schedule`` and whose other heads output nothing.

    ``plain_level`` is the input RMSNorm's output at ``CONST_DIM`` for a plain token, ``marker_level``
    at ``CONST_DIM`` (= at ``MARKER_DIM``) for the marker, ``jitter_level`` the RMS there of a generated
    token's ``jitter_dims`` (dims that are zero in the marker's embedding: the jitter's source).
    """
    d, half = shape.head_dim, shape.head_dim // 2
    slow, still = half - 2, half - 1  # RoPE pairs (i, i + half): the slow one, and the slowest
    freq = shape.rope_theta ** (-2 * slow / d)
    if schedule.phase + freq * shape.max_positions > 2 * math.pi - schedule.phase - 0.3:
        raise ValueError("the slow RoPE pair turns too far over the window for a monotone recency score")
    if shape.rope_theta ** (-2 * still / d) * shape.max_positions > 0.2:
        raise ValueError("the slowest RoPE pair is not position-free over the window")
    a = schedule.decay / (freq * math.sin(schedule.phase))  # slope a * f * sin(phase) = decay at d = 0
    # The marker's raw key leans a little into the slowest pair, which k_norm's weight there amplifies: its
    # slow-pair part stays that of a plain key (to 5e-5), so marker and plain keys fall alike with d.
    marker_key, still_gain = 0.01, 25.0
    lean = marker_key * still_gain / math.sqrt(1 + marker_key**2)
    query = torch.zeros(d)
    query[slow], query[slow + half] = a * math.cos(schedule.phase), a * math.sin(schedule.phase)
    query[still] = schedule.bonus / lean
    # q_norm leaves |q| = sqrt(D) * weight; the keys come out with |k| = sqrt(D): scores are q.k / sqrt(D)
    q_proj = torch.zeros(shape.heads * d, shape.hidden)
    q_proj[:d, CONST_DIM] = query / query.norm()
    q_norm = torch.full((d,), float(query.norm()) / math.sqrt(d))
    k_proj = torch.zeros(shape.kv_heads * d, shape.hidden)
    k_proj[slow, CONST_DIM] = 1.0
    k_proj[still, MARKER_DIM] = marker_key
    k_norm = torch.ones(d)
    k_norm[still] = k_norm[still + half] = still_gain
    v_proj = torch.zeros(shape.kv_heads * d, shape.hidden)
    alpha = schedule.after / plain_level
    v_proj[0, CONST_DIM] = alpha
    v_proj[0, MARKER_DIM] = schedule.before / marker_level - alpha
    v_proj[0, jitter_dims] = torch.randn(len(jitter_dims), generator=generator) * (
        schedule.jitter / (jitter_level * math.sqrt(len(jitter_dims)))
    )
    o_proj = torch.zeros(shape.hidden, shape.heads * d)
    o_proj[READOUT_DIM, 0] = 1.0
    return {
        "q_proj": q_proj,
        "k_proj": k_proj,
        "v_proj": v_proj,
        "o_proj": o_proj,
        "q_norm": q_norm,
        "k_norm": k_norm,
    }
