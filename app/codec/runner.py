"""DecodeRunner: a batch of code windows -> their audio, on one device (of one length, or packed on a CPU).

Two steps, both on the batcher's worker thread, which owns the device (the batch is chosen when the
device is free, by deadline, so it is not staged ahead; the copy of a batch of codes is a few hundred kB):

- ``prepare``: the rows go into a pinned host buffer taken from a pool (reused across batches of the
  same shape), are copied to the device on the copy stream, and an event marks the copy.
- ``run``: the compute stream waits for that event, then replays
  the CUDA graph of the shape (padded up to a captured batch size with copies of a real row; rows never
  mix, so padding changes no real row) or runs the decoder eagerly (or compiled), and the real rows come
  back to the host.

On cpu there are no streams and no pinning; the same calls run synchronously.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from app.codec.graphs import GraphPool
from app.core.device import DeviceOps

Forward = Callable[[torch.Tensor], torch.Tensor]  # [B, T] int64 codes -> [B, T * hop] float audio
PackedForward = Callable[[torch.Tensor, list[int]], list[torch.Tensor]]
"""``[N]`` int64 codes of windows of the given lengths back to back -> each window's ``[T_i * hop]`` audio."""


@dataclass
class PreparedBatch:
    """Rows on their way to the device: ``codes`` ``[padded, T]``, ready once ``copied`` has fired; or,
    windows of different lengths packed (``lengths``), ``codes`` ``[N]`` on the host (a CPU)."""

    rows: int
    codes: torch.Tensor
    copied: Any  # device event (None on cpu)
    host: torch.Tensor | None  # the pooled host buffer, returned to the pool after the run
    lengths: list[int] | None = None  # packed windows' lengths


class HostBufferPool:
    """Pinned (on accelerators) int64 host buffers by shape, handed out and returned across threads.

    Bounded: at most ``per_shape`` free buffers of a shape and ``shapes`` shapes (least recently used
    dropped), so the one-off lengths of final windows cannot pile up page-locked memory.
    """

    def __init__(self, ops: DeviceOps, shapes: int = 64, per_shape: int = 2) -> None:
        self._ops = ops
        self._shapes = shapes
        self._per_shape = per_shape
        self._free: OrderedDict[tuple[int, int], list[torch.Tensor]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, shape: tuple[int, int]) -> torch.Tensor:
        """A free buffer of ``shape`` (new if none is free)."""
        with self._lock:
            free = self._free.get(shape)
            if free:
                self._free.move_to_end(shape)
                return free.pop()
        return self._ops.pinned(shape, torch.long)

    def give(self, buffer: torch.Tensor) -> None:
        """Return ``buffer`` once no copy reads it any more."""
        shape = (buffer.shape[0], buffer.shape[1])
        with self._lock:
            free = self._free.setdefault(shape, [])
            self._free.move_to_end(shape)
            if len(free) < self._per_shape:
                free.append(buffer)
            while len(self._free) > self._shapes:
                self._free.popitem(last=False)


class DecodeRunner:
    """Decodes batches of equal-length windows with ``forward`` on ``ops.device``, and of windows of
    different lengths with ``packed`` (a CPU's; None: every batch is of one length).

    ``forward`` is the decoder module (or its compiled form): ``[B, T]`` codes -> ``[B, T * hop]``.
    Codes must already be validated (the batcher checks them on submit), so no step here syncs the host.
    """

    def __init__(
        self,
        forward: Forward,
        ops: DeviceOps,
        graphs: GraphPool | None = None,
        packed: PackedForward | None = None,
    ) -> None:
        self._forward = forward
        self._packed = packed
        self._ops = ops
        self.graphs = graphs
        self._buffers = HostBufferPool(ops)
        self._copy_stream: Any = None
        self._compute_stream: Any = None

    def bind_thread(self) -> None:
        """Called first on each thread that uses the runner: the device becomes current there."""
        self._ops.bind_thread()
        if self._ops.is_accelerator and self._copy_stream is None:
            self._copy_stream = self._ops.new_stream()
            self._compute_stream = self._ops.new_stream()

    def padded_rows(self, rows: int) -> int:
        """Rows actually computed for a batch of ``rows``: the next captured batch size with graphs."""
        if self.graphs is None:
            return rows
        padded = self.graphs.padded_batch(rows)
        return rows if padded is None else padded

    def prepare(self, rows: list[list[int]]) -> PreparedBatch:
        """Stage ``rows`` for ``run``: of one length, a pooled host buffer and an asynchronous copy to the
        device; of different lengths (``packed`` only), their codes back to back."""
        length = len(rows[0])
        if any(len(row) != length for row in rows):
            if self._packed is None:
                raise ValueError("windows of different lengths in one batch, and no packed decode")
            codes = torch.tensor([code for row in rows for code in row], dtype=torch.long)
            return PreparedBatch(len(rows), codes, None, None, [len(row) for row in rows])
        padded = self.padded_rows(len(rows))
        host = self._buffers.take((padded, length))
        host[: len(rows)] = torch.tensor(rows, dtype=torch.long)
        if padded > len(rows):
            host[len(rows) :] = host[0]
        if not self._ops.is_accelerator:
            return PreparedBatch(len(rows), host, None, host)
        with self._ops.on(self._copy_stream):
            codes = self._ops.to_device(host)
        return PreparedBatch(len(rows), codes, self._ops.record(self._copy_stream), host)

    def run(self, batch: PreparedBatch) -> tuple[list[np.ndarray], bool]:
        """Decode a prepared batch: float32 audio ``(T * hop,)`` per real row, and whether a graph ran."""
        if batch.lengths is not None:
            assert self._packed is not None
            return [audio.float().numpy() for audio in self._packed(batch.codes, batch.lengths)], False
        try:
            with self._ops.on(self._compute_stream):
                self._ops.wait(self._compute_stream, batch.copied)
                self._ops.used_on(batch.codes, self._compute_stream)  # allocated on the copy stream
                graph = None
                if self.graphs is not None:
                    graph = self.graphs.get(batch.codes.shape[0], batch.codes.shape[1])
                audio = graph.replay(batch.codes) if graph is not None else self._forward(batch.codes)
                host = audio[: batch.rows].to(device="cpu", dtype=torch.float32)  # waits for the compute
        finally:
            if batch.host is not None:
                self._buffers.give(batch.host)
        return [row.numpy() for row in host], graph is not None
