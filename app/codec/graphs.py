"""CUDA graphs of the decoder, one per (batch size, window length), captured at startup or on first use.

A graph replays the whole decoder forward as one launch, which removes the per-kernel launch cost that
dominates a 12-layer decoder at small batches. Shapes are fixed in a graph, which is why the stitcher
cuts windows to a few bucket lengths and the runner pads a batch (with copies of a real row: rows never
mix) up to the next captured batch size.

Capture runs in ``thread_local`` error mode, so another thread's CUDA work (the encoder, a copy) cannot
invalidate it. A capture that fails is remembered and never retried for that shape: that shape runs
eagerly from then on. Graphs share one memory pool; they replay one at a time on the worker thread,
which copies each output out before the next replay.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger(__name__)

GraphKey = tuple[int, int]  # (batch size, window length in codes)


@dataclass
class CapturedGraph:
    """One captured forward: ``inputs`` ``[B, T]`` int64 codes -> ``outputs`` ``[B, T * hop]``."""

    graph: torch.cuda.CUDAGraph
    inputs: torch.Tensor
    outputs: torch.Tensor

    def replay(self, codes: torch.Tensor) -> torch.Tensor:
        """Run the graph on ``codes`` (``[B, T]`` on the device) on the current stream; returns the
        static output tensor, valid until the next replay of any graph of the pool."""
        self.inputs.copy_(codes, non_blocking=True)
        self.graph.replay()
        return self.outputs


class GraphPool:
    """Graphs of ``forward`` by (batch, length); at most ``max_graphs`` of them, failures remembered.

    Used from one thread only (the device worker), which captures and replays.
    """

    def __init__(
        self,
        forward: Callable[[torch.Tensor], torch.Tensor],
        device: torch.device,
        batch_sizes: Iterable[int],
        max_graphs: int,
    ) -> None:
        self._forward = forward
        self._device = device
        self.batch_sizes = tuple(sorted(set(batch_sizes)))
        if not self.batch_sizes or self.batch_sizes[0] < 1:
            raise ValueError(f"graph batch sizes must be positive integers, got {self.batch_sizes}")
        self._max = max_graphs
        self._graphs: dict[GraphKey, CapturedGraph] = {}
        self._failed: set[GraphKey] = set()
        self._seen: Counter[GraphKey] = Counter()
        self._pool: Any = None  # graph_pool_handle(): an opaque handle, shared by the graphs

    @property
    def captured(self) -> list[GraphKey]:
        """Shapes with a graph."""
        return sorted(self._graphs)

    @property
    def failed(self) -> list[GraphKey]:
        """Shapes whose capture failed (they run eagerly)."""
        return sorted(self._failed)

    def padded_batch(self, batch: int) -> int | None:
        """The smallest graph batch size that holds ``batch`` rows, None when none does."""
        return next((size for size in self.batch_sizes if size >= batch), None)

    def get(self, batch: int, length: int) -> CapturedGraph | None:
        """The graph for exactly this shape; None to run eagerly. A shape without a graph is captured
        the second time it is asked for, if there is room: a capture costs a few forwards, which a
        one-off length (the last window of a short utterance) would never win back."""
        key = (batch, length)
        graph = self._graphs.get(key)
        if graph is not None or key in self._failed or len(self._graphs) >= self._max:
            return graph
        self._seen[key] += 1
        return self._capture(key) if self._seen[key] >= 2 else None

    def capture_all(self, keys: Iterable[GraphKey]) -> None:
        """Capture the given shapes now (startup), up to the cap; failures are logged and remembered."""
        for key in keys:
            if key not in self._graphs and key not in self._failed and len(self._graphs) < self._max:
                self._capture(key)

    def _capture(self, key: GraphKey) -> CapturedGraph | None:
        batch, length = key
        try:
            inputs = torch.zeros(batch, length, dtype=torch.long, device=self._device)
            warmup = torch.cuda.Stream(device=self._device)
            warmup.wait_stream(torch.cuda.current_stream(self._device))
            with torch.cuda.stream(warmup):  # allocator and cuDNN/cuBLAS choices settle outside the graph
                for _ in range(2):
                    self._forward(inputs)
            torch.cuda.current_stream(self._device).wait_stream(warmup)
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
                outputs = self._forward(inputs)
        except Exception as exc:  # any capture failure: this shape runs eagerly, for good
            self._failed.add(key)
            log.warning(
                "CUDA graph capture failed for batch %d x %d codes (%s); running it eagerly", *key, exc
            )
            return None
        captured = CapturedGraph(graph, inputs, outputs)
        self._graphs[key] = captured
        return captured
