"""Windows of different lengths decoded in one decoder call: where each window lies in the packed batch.

A CPU decodes a batch of short windows for little more than one of them: the matrix products run once
over all their codes, with the weights read once. Windows of one length stack as ``[B, T]``; windows of
different lengths are *packed*: their codes back to back, ``[1, N]`` with ``N`` the sum of their lengths.
Everything that works per code (the FSQ lookup, the linear layers, the norms over channels) runs on the
packed codes as they are. What mixes the codes of a window runs on each window alone, so no window sees
another's:

- the convolutions run on a *gapped* layout, each window between ``GAP`` zero columns, and their outputs
  are zeroed there again: a window's edges see the zeros of the convolution's own "same" padding;
- the group norms take their statistics over each window's own span (``Spans.group_norm``);
- attention attends within each window's span (``Spans.attend``);
- the ISTFT runs per window.

So a packed window decodes to what it decodes to alone, up to the rounding of matrix products of
another shape (float32: within about 1e-6 of full scale).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

GAP = 3
"""Zero columns around each window on the gapped layout: the half width of the widest convolution (the
backbone's embedding, kernel 7)."""


@dataclass(frozen=True)
class Spans:
    """Each window's ``[start, end)`` along the time axis of one layout, and the layout's gap mask
    (``[1, 1, T]`` in the activations' dtype, 1 on the windows' columns; None on the dense layout, which
    has no gaps)."""

    bounds: tuple[tuple[int, int], ...]
    mask: torch.Tensor | None = None

    def zero_gaps(self, x: torch.Tensor) -> torch.Tensor:
        """``[1, C, T]`` with its gap columns zeroed (a convolution's output leaks into them)."""
        return x if self.mask is None else x * self.mask

    def group_norm(self, norm: nn.GroupNorm, x: torch.Tensor) -> torch.Tensor:
        """``norm`` of ``[1, C, T]`` with each window's statistics from its own columns; 0 in the gaps."""
        out = torch.zeros_like(x)
        for start, end in self.bounds:
            out[..., start:end] = norm(x[..., start:end])
        return out

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Non-causal attention of ``[B, H, T, D]`` q, k, v within each window's span."""
        spans = [(q[..., s:e, :], k[..., s:e, :], v[..., s:e, :]) for s, e in self.bounds]
        return torch.cat([F.scaled_dot_product_attention(*qkv) for qkv in spans], dim=-2)


class Packing:
    """Where the windows of ``lengths`` codes lie when packed: ``dense`` (back to back, ``N`` columns) and
    ``gapped`` (``GAP`` zero columns before, between and after them), for activations of ``dtype``."""

    def __init__(
        self, lengths: list[int], device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
    ) -> None:
        if not lengths or min(lengths) < 1:
            raise ValueError(f"packed windows need at least one code each, got lengths {lengths}")
        ends = list(itertools.accumulate(lengths))
        self.dense = Spans(tuple(zip([0, *ends[:-1]], ends, strict=True)))
        starts = [GAP * (i + 1) + end - n for i, (n, end) in enumerate(zip(lengths, ends, strict=True))]
        self.width = ends[-1] + GAP * (len(lengths) + 1)
        columns = [torch.arange(s, s + n) for s, n in zip(starts, lengths, strict=True)]
        self._columns = torch.cat(columns).to(device)
        mask = torch.zeros(1, 1, self.width, device=device, dtype=dtype)
        mask[..., self._columns] = 1.0
        self.gapped = Spans(tuple((s, s + n) for s, n in zip(starts, lengths, strict=True)), mask)

    def spread(self, x: torch.Tensor) -> torch.Tensor:
        """Dense ``[1, N, C]`` -> gapped channels-first ``[1, C, width]``, zeros in the gaps."""
        out = x.new_zeros(1, self.width, x.shape[-1])
        out[:, self._columns] = x
        return out.transpose(1, 2)

    def gather(self, h: torch.Tensor) -> torch.Tensor:
        """Gapped channels-first ``[1, C, width]`` -> dense ``[1, N, C]``."""
        return h.transpose(1, 2)[:, self._columns]

    def split(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Dense ``[1, N, ...]`` -> each window's ``[1, T_i, ...]``."""
        return [x[:, s:e] for s, e in self.dense.bounds]
