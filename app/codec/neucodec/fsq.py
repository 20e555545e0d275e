"""Finite scalar quantization (FSQ) lookup: code index -> embedding, as the NeuCodec decoder uses it.

NeuCodec quantizes with a residual FSQ of a single quantizer, levels ``[4] * 8`` and width 2048.
Decoding needs only the index -> embedding direction: split the index into one digit per level
(mixed radix, first level least significant), centre and scale each digit to [-1, 1), then project
the 8 values up with ``project_out``. ``project_in`` belongs to the encoder; it is kept so that the
module's parameters match the checkpoint's ``generator.quantizer.*`` keys.
"""

from __future__ import annotations

import torch
from torch import nn


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
        # basis[i] = levels[0] * ... * levels[i-1]: the place value of digit i.
        basis = torch.cumprod(torch.cat([torch.ones(1, dtype=torch.long), levels_t[:-1]]), dim=0)
        self.register_buffer("levels", levels_t, persistent=False)
        self.register_buffer("basis", basis, persistent=False)

    def codes_to_values(self, codes: torch.Tensor) -> torch.Tensor:
        """Per-level values in [-1, 1): ``[B, T]`` int -> ``[B, T, len(levels)]`` float32."""
        digits = (codes.unsqueeze(-1) // self.basis) % self.levels  # [B, T, L]
        half_width = self.levels // 2
        return (digits - half_width) / half_width

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        values = self.codes_to_values(codes).to(self.project_out.weight.dtype)
        return self.project_out(values)
