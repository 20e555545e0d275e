"""Bounded statistics of one batcher: counts, sums, maxima and a fixed-size sample of each timing.

A server runs for months; statistics that append a float per decode window grow without end. Here
every field is bounded: batch sizes are a ``Counter`` over at most ``max_batch`` keys, and each timing
keeps its count, total, maximum, last value and a uniform random sample of at most ``capacity`` values
(Vitter's reservoir algorithm R), from which percentiles are estimated.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

RESERVOIR_SIZE = 1024


class Reservoir:
    """Count, total, max, last and a uniform sample (at most ``capacity`` values) of a stream of floats."""

    def __init__(self, capacity: int = RESERVOIR_SIZE, seed: int = 0) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.count = 0
        self.total = 0.0
        self.max = 0.0
        self.last = 0.0
        self.sample: list[float] = []
        self._rng = random.Random(seed)

    def add(self, value: float) -> None:
        """Observe one value (O(1) time, memory bounded by ``capacity``)."""
        self.count += 1
        self.total += value
        self.max = value if self.count == 1 else max(self.max, value)
        self.last = value
        if len(self.sample) < self.capacity:
            self.sample.append(value)
            return
        slot = self._rng.randrange(self.count)  # keep the new value with probability capacity / count
        if slot < self.capacity:
            self.sample[slot] = value

    @property
    def mean(self) -> float:
        """Mean of every value observed (0 for none)."""
        return self.total / self.count if self.count else 0.0

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0-100) of the sample; exact while fewer than ``capacity`` were seen."""
        if not self.sample:
            return 0.0
        return float(np.percentile(np.asarray(self.sample), q))

    def __len__(self) -> int:
        return self.count


@dataclass
class BatchStats:
    """Plain bounded counters of one batcher: batch sizes, per-item queue waits, compute times, graph hits."""

    sizes: Counter[int] = field(default_factory=Counter)
    waits_s: Reservoir = field(default_factory=Reservoir)
    compute_s: Reservoir = field(default_factory=Reservoir)
    graph_hits: int = 0
    graph_misses: int = 0
    depth: int = 0

    def observe_codec_batch(self, queue: str, size: int, compute_s: float, graph: bool) -> None:
        self.sizes[size] += 1
        self.compute_s.add(compute_s)
        if graph:
            self.graph_hits += 1
        else:
            self.graph_misses += 1

    def observe_codec_queue_wait(self, queue: str, wait_s: float) -> None:
        self.waits_s.add(wait_s)

    def set_codec_queue_depth(self, queue: str, depth: int) -> None:
        self.depth = depth
