"""One transformers ``DynamicCache`` holding several generations as a left-padded batch.

Every layer keeps ``[B, H, W, D]`` keys and values; row ``i`` holds its ``n_i`` positions right-aligned in
the last ``n_i`` columns, the left padding masked out by the caller's 2-D attention mask, and runs at its
own position ids, so its attention and RoPE see exactly what they would alone. A joining row's cache is
left-padded to the batch's width (or the batch to the row's) and concatenated on B; leaving rows are
dropped with ``index_select`` and the columns no remaining row uses are trimmed; a row that pauses
(``split``) leaves with a copy of its own columns and joins again later. A ``PrefillGroup``
prefills several prompts the same way: left-padded to the longest, in chunks, then joins the batch.
Used by the NeuCodec batched engine (``batched_source.py``) and the MOSS frame engine (``moss/engine.py``).

**Growing layers.** transformers' ``DynamicLayer`` appends each step's keys and values with ``torch.cat``,
a copy of the whole cache per step per layer: at 8 rows of 1,600 positions (the 1.7B model, bf16, 2
vCPUs) half of a decode step went into those copies (575 ms a step against 286 ms with ``GrowingLayer``,
the same logits). ``GrowingLayer`` writes into spare capacity instead and grows by a quarter (at least
``GROW_MIN`` columns) when it runs out, so its memory is at most 25% + ``GROW_MIN`` columns above what
its rows hold. ``new_cache`` makes a cache of them; the engines start every cache with it.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

from app.core.errors import BackendError

GROW_MIN = 64  # fewest columns a GrowingLayer adds when it runs out of capacity


class GrowingLayer(DynamicLayer):
    """A full-attention cache layer whose keys and values ``[B, H, n, D]`` are views of buffers with spare
    columns: a step writes its new columns in place. Assigning ``keys``/``values`` (as ``append_rows``
    and ``keep_rows`` do) makes the assigned tensor the new buffer."""

    _k: torch.Tensor | None = None  # buffers [B, H, capacity, D]
    _v: torch.Tensor | None = None
    _nk = 0  # columns in use of each (equal, except between the two assignments of a swap)
    _nv = 0

    @property
    def keys(self) -> torch.Tensor | None:
        return None if self._k is None else self._k[..., : self._nk, :]

    @keys.setter
    def keys(self, tensor: torch.Tensor | None) -> None:
        self._k, self._nk = tensor, _columns(tensor)

    @property
    def values(self) -> torch.Tensor | None:
        return None if self._v is None else self._v[..., : self._nv, :]

    @values.setter
    def values(self, tensor: torch.Tensor | None) -> None:
        self._v, self._nv = tensor, _columns(tensor)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, new = self._nk, key_states.shape[-2]
        keys, values = self._k, self._v
        if keys is None or values is None or n + new > min(_columns(keys), _columns(values)):
            shape = (*key_states.shape[:2], n + new + max(GROW_MIN, n // 4), key_states.shape[-1])
            grown_keys, grown_values = key_states.new_empty(shape), value_states.new_empty(shape)
            if n and keys is not None and values is not None:
                grown_keys[..., :n, :] = keys[..., :n, :]
                grown_values[..., :n, :] = values[..., :n, :]
            keys, values = self._k, self._v = grown_keys, grown_values
        keys[..., n : n + new, :] = key_states
        values[..., n : n + new, :] = value_states
        self._nk = self._nv = n + new
        return keys[..., : n + new, :], values[..., : n + new, :]


def _columns(tensor: torch.Tensor | None) -> int:
    """Positions held by a ``[B, H, T, D]`` cache tensor (0 for None or the empty placeholder)."""
    return tensor.shape[-2] if tensor is not None and tensor.dim() == 4 else 0


def new_cache(config: Any) -> Any:
    """An empty ``DynamicCache`` for a model of ``config`` whose full-attention layers are growing layers
    (other kinds, e.g. sliding windows, are kept as transformers makes them)."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


def cache_layers(cache: Any) -> list[Any]:
    """The per-layer key/value holders of a DynamicCache; only full-attention layers can be batched."""
    layers = list(cache.layers)
    if any(type(layer) not in (DynamicLayer, GrowingLayer) for layer in layers):
        raise BackendError("a batched LM engine needs full attention in every layer (no sliding window)")
    return layers


def pad_left(tensor: torch.Tensor, columns: int) -> torch.Tensor:
    """``[B, H, T, D]`` with ``columns`` zero columns prepended on the T axis."""
    if columns == 0:
        return tensor
    shape = (*tensor.shape[:2], columns, tensor.shape[3])
    return torch.cat([tensor.new_zeros(shape), tensor], dim=2)


def append_rows(batch: Any, batch_width: int, rows: Any, rows_width: int) -> int:
    """Concatenate the cache ``rows`` (``rows_width`` columns) after the rows of ``batch`` (``batch_width``),
    in place in ``batch``, both left-padded to the wider; returns the new width."""
    width = max(batch_width, rows_width)
    merged = []
    for mine, theirs in zip(cache_layers(rows), cache_layers(batch), strict=True):
        keys = torch.cat(
            [pad_left(theirs.keys, width - batch_width), pad_left(mine.keys, width - rows_width)]
        )
        values = torch.cat(
            [pad_left(theirs.values, width - batch_width), pad_left(mine.values, width - rows_width)]
        )
        merged.append((keys, values))
    for layer, (keys, values) in zip(cache_layers(batch), merged, strict=True):
        layer.keys, layer.values = keys, values
    return width


def keep_rows(cache: Any, keep: list[int], trim: int) -> None:
    """Keep only the rows ``keep`` of ``cache`` (in that order) and drop its first ``trim`` columns."""
    index = torch.tensor(keep, device=cache_layers(cache)[0].keys.device)
    for layer in cache_layers(cache):
        layer.keys = layer.keys.index_select(0, index)[:, :, trim:]
        layer.values = layer.values.index_select(0, index)[:, :, trim:]


def take_rows(cache: Any, rows: list[int], trim: int) -> Any:
    """A new cache holding copies of the rows ``rows`` of ``cache`` without their first ``trim`` columns;
    ``cache`` itself is left as it was."""
    taken = copy.copy(cache)
    taken.layers = [copy.copy(layer) for layer in cache_layers(cache)]
    keep_rows(taken, rows, trim)
    return taken


class CachedRow(Protocol):
    """A generation in a padded batch: the positions it holds in the cache."""

    length: int


RowT = TypeVar("RowT", bound=CachedRow)


@dataclass
class PaddedBatch(Generic[RowT]):
    """Rows sharing one left-padded cache of ``width`` columns (row ``i`` of the cache is ``rows[i]``)."""

    rows: list[RowT] = field(default_factory=list)
    cache: Any = None
    width: int = 0

    def remove(self, gone: Collection[RowT]) -> None:
        """Drop the rows in ``gone`` (by identity) and the cache columns no remaining row uses."""
        keep = [i for i, row in enumerate(self.rows) if not any(row is g for g in gone)]
        self.rows = [self.rows[i] for i in keep]
        if not self.rows:
            self.cache, self.width = None, 0
            return
        width = max(row.length for row in self.rows)
        keep_rows(self.cache, keep, self.width - width)
        self.width = width

    def split(self, leaving: Collection[RowT]) -> list[PaddedBatch[RowT]]:
        """The rows in ``leaving`` out of the batch, each as a batch of its own holding its cache (its
        ``length`` columns, no padding); the others stay, as ``remove`` leaves them."""
        alone = [
            PaddedBatch([row], take_rows(self.cache, [i], self.width - row.length), row.length)
            for i, row in enumerate(self.rows)
            if any(row is g for g in leaving)
        ]
        self.remove(leaving)
        return alone

    def join(self, other: PaddedBatch[RowT]) -> None:
        """Append the rows of ``other`` and their cache (both left-padded to the wider)."""
        if self.cache is None:
            self.cache, self.width, self.rows = other.cache, other.width, list(other.rows)
        else:
            self.width = append_rows(self.cache, self.width, other.cache, other.width)
            self.rows.extend(other.rows)


# A group never spends more than this share of its prefill on padding: the next row in line that would
# make it exceed it starts the next group instead (on a CPU a padded column costs as much as a real one).
MAX_PADDING_SHARE = 0.5


@dataclass
class PrefillGroup(PaddedBatch[RowT]):
    """Rows prefilled together: their prompts left-padded to the longest, ``width`` columns done so far.

    ``inputs`` is ``[G, L, ...]``: row ``i``'s prompt right-aligned after ``pads[i]`` copies of its first
    id (any valid id: the padding is masked out and never attended to).
    """

    inputs: torch.Tensor | None = None
    pads: list[int] = field(default_factory=list)

    def form(self, admitted: deque[RowT], most: int, prompt: Callable[[RowT], torch.Tensor]) -> None:
        """Take the next rows in arrival order (at most ``most``, padding within ``MAX_PADDING_SHARE``);
        ``prompt(row)`` is its ``[1, P, ...]`` prompt."""
        rows = [admitted.popleft()]
        prompts = [prompt(rows[0])]
        while admitted and len(rows) < most:
            candidate = prompt(admitted[0])
            lengths = [int(p.shape[1]) for p in [*prompts, candidate]]
            if len(lengths) * max(lengths) * (1 - MAX_PADDING_SHARE) > sum(lengths):
                break
            rows.append(admitted.popleft())
            prompts.append(candidate)
        longest = max(int(p.shape[1]) for p in prompts)
        self.pads = [longest - int(p.shape[1]) for p in prompts]
        padded = [
            torch.cat([p[:, :1].expand(-1, pad, *p.shape[2:]), p], dim=1)
            for p, pad in zip(prompts, self.pads, strict=True)
        ]
        self.rows, self.inputs, self.cache, self.width = rows, torch.cat(padded), None, 0

    def next_chunk(self, budget: int) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """The next chunk (``budget`` prompt tokens over all rows): its inputs ``[G, T, ...]``, the
        attention mask over every column so far ``[G, width + T]`` and the positions ``[G, T]``; both
        None when no row is padded (the plain causal path, as a row alone)."""
        inputs = self.inputs
        assert inputs is not None
        start = self.width
        stop = min(start + max(1, budget // len(self.rows)), int(inputs.shape[1]))
        if not any(self.pads):
            return inputs[:, start:stop], None, None
        pads = torch.tensor(self.pads, device=inputs.device)[:, None]
        mask = (torch.arange(stop, device=inputs.device)[None] >= pads).long()
        positions = (torch.arange(start, stop, device=inputs.device)[None] - pads).clamp(min=0)
        return inputs[:, start:stop], mask, positions

    def advance(self, cache: Any, columns: int) -> bool:
        """Record a chunk of ``columns`` prefilled into ``cache``; True once the whole prompt is in (the
        rows' ``length`` is then set)."""
        assert self.inputs is not None
        self.cache, self.width = cache, self.width + columns
        if self.width < int(self.inputs.shape[1]):
            return False
        for row, pad in zip(self.rows, self.pads, strict=True):
            row.length = self.width - pad
        return True

    def hand_over(self, batch: PaddedBatch[RowT], done: Collection[RowT]) -> None:
        """Once prefilled: the rows not ``done`` (finished or failed at their first sample) join ``batch``
        with their cache, and the group is emptied."""
        if done:
            self.remove(done)
        if self.rows:
            batch.join(self)
        self.reset()

    def drop(self, gone: Collection[RowT]) -> None:
        """Drop rows mid-prefill: their prompts and their cache rows."""
        keep = [i for i, row in enumerate(self.rows) if not any(row is g for g in gone)]
        if not keep:
            self.reset()
            return
        assert self.inputs is not None
        self.rows = [self.rows[i] for i in keep]
        self.pads = [self.pads[i] for i in keep]
        self.inputs = self.inputs[keep]
        if self.cache is not None:
            keep_rows(self.cache, keep, 0)

    def reset(self) -> None:
        """Empty the group (its rows joined the batch or left)."""
        self.rows, self.cache, self.width, self.inputs, self.pads = [], None, 0, None, []
