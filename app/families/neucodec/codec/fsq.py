"""Finite scalar quantization (FSQ) in both directions, as NeuCodec uses it.

NeuCodec quantizes with a residual FSQ of a single quantizer, levels ``[4] * 8`` and width 2048.
Decoding needs only the index -> embedding direction (``FSQLookup``): split the index into one digit
per level (mixed radix, first level least significant), centre and scale each digit to [-1, 1), then
project the 8 values up with ``project_out``. ``project_in`` belongs to the encoder; the lookup keeps
it so that its parameters match the checkpoint's ``generator.quantizer.*`` keys.

Encoding (``FSQQuantizer``) projects down with ``project_in``, bounds each value with a shifted tanh
and rounds it to one of ``levels[i]`` integers. The residual FSQ the checkpoint was made with
(vector-quantize-pytorch 1.17.8, pinned by neucodec) bounds the projected values once itself and
again inside its single FSQ layer, so the codes are ``round(bound(bound(project_in(x))))``; we
reproduce that double bound, in float32 as the library forces.
"""

from __future__ import annotations

import torch
from torch import nn

BOUND_EPS = 1e-3


def _basis(levels: torch.Tensor) -> torch.Tensor:
    """Place value of each digit: ``basis[i] = levels[0] * ... * levels[i-1]``."""
    return torch.cumprod(torch.cat([torch.ones_like(levels[:1]), levels[:-1]]), dim=0)


class FSQLookup(nn.Module):
    """Index -> embedding of a single-quantizer residual FSQ.

    Input: codes ``[B, T]`` integer in [0, prod(levels)). Output: ``[B, T, vq_dim]`` float.
    """

    def __init__(self, vq_dim: int, levels: tuple[int, ...]) -> None:
        super().__init__()
        n_levels = len(levels)
        self.project_in = nn.Linear(vq_dim, n_levels)
        self.project_out = nn.Linear(n_levels, vq_dim)
        levels_t = torch.tensor(levels, dtype=torch.long)
        self.levels: torch.Tensor
        self.basis: torch.Tensor
        self.register_buffer("levels", levels_t, persistent=False)
        self.register_buffer("basis", _basis(levels_t), persistent=False)

    def codes_to_values(self, codes: torch.Tensor) -> torch.Tensor:
        """Per-level values in [-1, 1): ``[B, T]`` int -> ``[B, T, len(levels)]`` float32."""
        digits = (codes.unsqueeze(-1) // self.basis) % self.levels  # [B, T, L]
        half_width = self.levels // 2
        return (digits - half_width) / half_width

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        values = self.codes_to_values(codes).to(self.project_out.weight.dtype)
        return self.project_out(values)


class FSQQuantizer(nn.Module):
    """Embedding -> code index of the same FSQ: ``[B, T, vq_dim]`` float -> ``[B, T]`` int64 codes.

    Holds only ``project_in`` (key ``generator.quantizer.project_in.*``). The levels are kept as a
    plain tuple, so every tensor of the module is in its state dict.
    """

    def __init__(self, vq_dim: int, levels: tuple[int, ...]) -> None:
        super().__init__()
        self.level_sizes = tuple(levels)
        self.project_in = nn.Linear(vq_dim, len(levels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.project_in(x).float()  # [B, T, L]
        levels = torch.tensor(self.level_sizes, dtype=torch.int32, device=z.device)
        half_l = (levels - 1) * (1 + BOUND_EPS) / 2
        offset = torch.where(levels % 2 == 0, 0.5, 0.0)
        shift = (offset / half_l).atanh()
        for _ in range(2):  # the double bound of vector-quantize-pytorch's ResidualFSQ
            z = (z + shift).tanh() * half_l - offset
        digits = z.round().long() + (levels // 2).long()  # [B, T, L] in [0, levels)
        return (digits * _basis(levels.long())).sum(dim=-1)
