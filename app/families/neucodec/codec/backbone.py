"""The NeuCodec backbone: conv embed, resnet prior, transformers, resnet post, layer norm."""

from __future__ import annotations

import torch
from torch import nn

from app.families.neucodec.codec.packed import Packing
from app.families.neucodec.codec.resnet import ResnetBlock
from app.families.neucodec.codec.transformer import TransformerBlock

FINAL_NORM_EPS = 1e-6


class Backbone(nn.Module):
    """Keeps the time resolution: ``[B, T, C]`` -> ``[B, T, C]`` with ``C = hidden_dim``.

    ``embed`` (kernel-7 conv) -> ``prior_net`` (2 resnet blocks) -> ``transformers`` (``depth`` blocks)
    -> ``post_net`` (2 resnet blocks) -> ``final_layer_norm``.
    """

    def __init__(self, hidden_dim: int, depth: int, heads: int) -> None:
        super().__init__()
        self.embed = nn.Conv1d(hidden_dim, hidden_dim, kernel_size=7, padding=3)
        self.prior_net = nn.Sequential(ResnetBlock(hidden_dim), ResnetBlock(hidden_dim))
        self.transformers = nn.Sequential(*(TransformerBlock(hidden_dim, heads) for _ in range(depth)))
        self.post_net = nn.Sequential(ResnetBlock(hidden_dim), ResnetBlock(hidden_dim))
        self.final_layer_norm = nn.LayerNorm(hidden_dim, eps=FINAL_NORM_EPS)

    def forward(self, x: torch.Tensor, packing: Packing | None = None) -> torch.Tensor:
        """``packing``: ``x`` is ``[1, N, C]``, windows packed back to back (``app.families.neucodec.codec.
        packed``); the convolution stages run on the gapped layout, the transformers on the dense one."""
        if packing is not None:
            return self._packed(x, packing)
        x = x.transpose(1, 2)  # [B, T, C] -> [B, C, T]
        x = self.prior_net(self.embed(x))
        x = x.transpose(1, 2)  # [B, C, T] -> [B, T, C]
        x = self.transformers(x)
        x = x.transpose(1, 2)  # [B, T, C] -> [B, C, T]
        x = self.post_net(x)
        x = x.transpose(1, 2)  # [B, C, T] -> [B, T, C]
        return self.final_layer_norm(x)

    def _packed(self, x: torch.Tensor, packing: Packing) -> torch.Tensor:
        gapped, dense = packing.gapped, packing.dense
        h = gapped.zero_gaps(self.embed(packing.spread(x)))  # [1, C, width]
        for block in self.prior_net:
            h = block(h, gapped)
        x = packing.gather(h)  # [1, N, C]
        for block in self.transformers:
            x = block(x, dense)
        h = packing.spread(x)
        for block in self.post_net:
            h = block(h, gapped)
        return self.final_layer_norm(packing.gather(h))
