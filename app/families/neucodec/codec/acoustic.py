"""The acoustic encoder (``CodecEnc`` in the checkpoint): 16 kHz waveform -> one vector per 320 samples.

A DAC/BigVGAN-style conv stack: a 7-tap conv, five strided blocks (strides 2, 2, 4, 4, 5; each
block = three dilated residual units, an anti-aliased SnakeBeta and a strided conv that doubles the
channels), then SnakeBeta and a 3-tap conv to ``acoustic_dim``. Every conv is weight-normalised the
pre-parametrisation way, so the checkpoint stores ``weight_g`` ``[out, 1, 1]`` and ``weight_v``;
the conv weight is ``weight_g * weight_v / ||weight_v||`` (norm over all but the output dim).

Length rule: a strided conv with kernel ``2s``, stride ``s`` and padding ``ceil(s / 2)`` maps ``L``
samples to ``L / s`` when ``s`` divides ``L``, so a waveform of ``320 k`` samples gives ``k`` frames.
The padding (zeros in the convs, edge repeats in the resamplers) makes frames near the end depend on
where the waveform ends: batching items of different lengths with zero padding would change them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from app.families.neucodec.codec.alias_free import AliasFreeSnake
from app.families.neucodec.codec.encoder_config import NeuCodecEncoderConfig


class WNConv1d(nn.Module):
    """Weight-normalised Conv1d: ``[B, C_in, T]`` -> ``[B, C_out, T']`` (``weight_g/_v``, ``bias``)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        *,
        stride: int = 1,
        dilation: int = 1,
        padding: int = 0,
    ) -> None:
        super().__init__()
        self.weight_g = nn.Parameter(torch.ones(out_channels, 1, 1))
        self.weight_v = nn.Parameter(torch.empty(out_channels, in_channels, kernel_size))
        self.bias = nn.Parameter(torch.zeros(out_channels))
        nn.init.kaiming_uniform_(self.weight_v, a=5**0.5)
        self.stride, self.dilation, self.padding = stride, dilation, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = torch._weight_norm(self.weight_v, self.weight_g, 0)  # the op nn.utils.weight_norm uses
        return F.conv1d(x, weight, self.bias, self.stride, self.padding, self.dilation)


class ResidualUnit(nn.Module):
    """``x + conv1x1(snake(conv7_dilated(snake(x))))``; ``[B, C, T]`` -> ``[B, C, T]``."""

    def __init__(self, channels: int, dilation: int) -> None:
        super().__init__()
        self.block = nn.Sequential(
            AliasFreeSnake(channels),
            WNConv1d(channels, channels, 7, dilation=dilation, padding=3 * dilation),
            AliasFreeSnake(channels),
            WNConv1d(channels, channels, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


class EncoderBlock(nn.Module):
    """Residual units at ``channels // 2``, then a strided conv: ``[B, C/2, T]`` -> ``[B, C, T / stride]``."""

    def __init__(self, channels: int, stride: int, dilations: tuple[int, ...]) -> None:
        super().__init__()
        half = channels // 2
        self.block = nn.Sequential(
            *(ResidualUnit(half, dilation) for dilation in dilations),
            AliasFreeSnake(half),
            WNConv1d(half, channels, 2 * stride, stride=stride, padding=stride // 2 + stride % 2),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class AcousticEncoder(nn.Module):
    """``CodecEnc``: waveform ``[B, 1, 320 k]`` -> features ``[B, acoustic_dim, k]`` (channels first)."""

    def __init__(self, config: NeuCodecEncoderConfig) -> None:
        super().__init__()
        channels = config.acoustic_channels
        blocks: list[nn.Module] = [WNConv1d(1, channels, 7, padding=3)]
        for stride in config.acoustic_strides:
            channels *= 2
            blocks.append(EncoderBlock(channels, stride, config.acoustic_dilations))
        self.conv_blocks = nn.Sequential(*blocks)
        self.conv_final_block = nn.Sequential(
            AliasFreeSnake(channels), WNConv1d(channels, config.acoustic_dim, 3, padding=1)
        )

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        return self.conv_final_block(self.conv_blocks(audio))
