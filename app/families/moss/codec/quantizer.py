"""Residual LFQ bottleneck: encoder features <-> codes ``[frames, codebooks]``, always in float32.

Every projection is a weight-normalised 1x1 Conv1d with bias (torch's ``parametrizations.weight_norm``,
keys ``parametrizations.weight.original0`` = g and ``original1`` = v). Stage j of the residual:

- index: ``e = in_proj_j(residual)``; the code is the nearest codebook row after L2-normalising both
  ``e`` and the rows (so the largest cosine similarity);
- value: ``out_proj_j(codebook_j[code])`` of the *raw* row; added to the sum, taken off the residual.

Decoding ``nq`` codebooks sums the first ``nq`` values, then ``output_proj``. Being residual, the first k
codes do not depend on how many codebooks are encoded.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from app.families.moss.codec.config import QuantizerConfig


def _wn_conv(cin: int, cout: int) -> nn.Module:
    """A weight-normalised 1x1 conv (weight = g * v / ||v||, norm per output channel)."""
    return nn.utils.parametrizations.weight_norm(nn.Conv1d(cin, cout, kernel_size=1))


def _proj(cin: int, cout: int) -> nn.Module:
    return _wn_conv(cin, cout) if cin != cout else nn.Identity()


class LFQ(nn.Module):
    """One codebook: ``in_proj`` (rvq_dim -> codebook_dim), ``out_proj`` (back), ``codebook`` rows."""

    def __init__(self, rvq_dim: int, codebook_size: int, codebook_dim: int) -> None:
        super().__init__()
        self.in_proj = _proj(rvq_dim, codebook_dim)
        self.out_proj = _proj(codebook_dim, rvq_dim)
        self.codebook = nn.Embedding(codebook_size, codebook_dim)

    def value(self, codes: torch.Tensor) -> torch.Tensor:
        """``codes [N]`` -> ``[1, rvq_dim, N]``: the out-projected raw codebook rows."""
        return self.out_proj(self.codebook.weight.float()[codes].T[None]).float()

    def quantize(self, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``residual [1, rvq_dim, N]`` -> (codes ``[N]``, value ``[1, rvq_dim, N]``)."""
        latent = self.in_proj(residual).float()  # [1, codebook_dim, N]
        e = F.normalize(latent[0].T.float())  # [N, codebook_dim]
        book = F.normalize(self.codebook.weight.float())
        # squared distances of unit vectors, in the reference's order of operations so ties break alike
        dist = e.pow(2).sum(1, keepdim=True) - 2 * e @ book.T + book.pow(2).sum(1, keepdim=True).T
        codes = (-dist).max(1).indices
        row = self.codebook.weight.float()[codes].T[None]
        row = latent + (row - latent)  # the straight-through form the reference evaluates (same rounding)
        return codes, self.out_proj(row).float()


class ResidualLFQ(nn.Module):
    """Keys: ``input_proj``, ``output_proj`` (weight-normed 1x1 convs) and ``quantizers.{j}``."""

    def __init__(self, config: QuantizerConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.input_proj: nn.Module = _proj(c.input_dim, c.rvq_dim)
        self.output_proj: nn.Module = _proj(c.rvq_dim, c.output_dim)
        self.quantizers = nn.ModuleList(
            [LFQ(c.rvq_dim, c.codebook_size, c.codebook_dim) for _ in range(c.num_quantizers)]
        )

    def encode(self, features: torch.Tensor, num_quantizers: int) -> torch.Tensor:
        """``features [N, input_dim]`` -> codes ``[N, num_quantizers]`` (int64)."""
        residual = self.input_proj(features.T[None].float()).float()  # [1, rvq_dim, N]
        codes = []
        for lfq in self.lfqs()[:num_quantizers]:
            code, value = lfq.quantize(residual)
            residual = residual - value
            codes.append(code)
        return torch.stack(codes, dim=1)

    def lfqs(self) -> list[LFQ]:
        """The codebooks, in order (typed: a ModuleList hands out plain Modules)."""
        return [lfq for lfq in self.quantizers if isinstance(lfq, LFQ)]

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes ``[N, nq]`` (nq <= num_quantizers) -> ``[N, output_dim]`` float32."""
        n, nq = codes.shape
        total = torch.zeros(1, self.config.rvq_dim, n, device=codes.device, dtype=torch.float32)
        lfqs = self.lfqs()
        for j in range(nq):
            total = total + lfqs[j].value(codes[:, j])
        return self.output_proj(total)[0].T
