"""One transformers ``DynamicCache`` holding several generations as a left-padded batch.

Every layer keeps ``[B, H, W, D]`` keys and values; row ``i`` holds its ``n_i`` positions right-aligned in
the last ``n_i`` columns, the left padding masked out by the caller's 2-D attention mask, and runs at its
own position ids, so its attention and RoPE see exactly what they would alone. A joining row's cache is
left-padded to the batch's width (or the batch to the row's) and concatenated on B; leaving rows are
dropped with ``index_select`` and the columns no remaining row uses are trimmed. Used by the NeuCodec
batched engine (``batched_source.py``) and the MOSS frame engine (``moss/engine.py``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import torch

from app.core.errors import BackendError


def cache_layers(cache: Any) -> list[Any]:
    """The per-layer key/value holders of a DynamicCache; only full-attention layers can be batched."""
    from transformers.cache_utils import DynamicLayer

    layers = list(cache.layers)
    if any(type(layer) is not DynamicLayer for layer in layers):
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
