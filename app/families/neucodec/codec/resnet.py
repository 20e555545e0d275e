"""Pre-activation residual block of the NeuCodec backbone (the ``prior_net`` / ``post_net`` stages)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from app.families.neucodec.codec.packed import Spans

GROUPS = 32
NORM_EPS = 1e-6


class ResnetBlock(nn.Module):
    """``x + conv2(swish(norm2(conv1(swish(norm1(x))))))`` with kernel-3 "same" convolutions.

    Input and output: ``[B, C, T]``. GroupNorm works per item over (channels of a group, time), so
    items of a batch do not mix. The original block has a dropout before ``conv2``; it is a no-op in
    eval mode and has no weights, so it is left out.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(GROUPS, channels, eps=NORM_EPS)
        self.conv1 = nn.Conv1d(channels, channels, kernel_size=3, padding=1)
        self.norm2 = nn.GroupNorm(GROUPS, channels, eps=NORM_EPS)
        self.conv2 = nn.Conv1d(channels, channels, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor, spans: Spans | None = None) -> torch.Tensor:
        """``spans``: packed windows on the gapped layout (``app.families.neucodec.codec.packed``), whose
        gaps ``x`` holds zeros and the output keeps so."""
        if spans is None:
            h = self.conv1(F.silu(self.norm1(x)))
            return x + self.conv2(F.silu(self.norm2(h)))
        h = spans.zero_gaps(self.conv1(F.silu(spans.group_norm(self.norm1, x))))
        return x + spans.zero_gaps(self.conv2(F.silu(spans.group_norm(self.norm2, h))))
