"""Anti-aliased SnakeBeta activation of the NeuCodec acoustic encoder (BigVGAN style).

The activation runs at twice the rate: upsample by 2 with a windowed-sinc filter, apply SnakeBeta,
low-pass and decimate by 2. Both filters are 12-tap Kaiser-windowed sincs with cutoff 1/4 of the
doubled rate; the signal edges are extended by repeating the edge sample (``replicate`` padding).
The filters are persistent buffers because the checkpoint stores them (``upsample.filter``,
``downsample.lowpass.filter``); the values it stores are the ones computed here.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

RATIO = 2
TAPS = 12


def kaiser_sinc_lowpass(cutoff: float, half_width: float, taps: int) -> torch.Tensor:
    """Kaiser-windowed sinc low-pass filter ``[1, 1, taps]`` (``taps`` even), normalised to sum 1.

    ``cutoff`` and ``half_width`` are in cycles per sample; the Kaiser beta follows the usual
    attenuation formula for a transition band of ``2 * half_width``.
    """
    half = taps // 2
    attenuation = 2.285 * (half - 1) * math.pi * (4 * half_width) + 7.95
    if attenuation > 50.0:
        beta = 0.1102 * (attenuation - 8.7)
    elif attenuation >= 21.0:
        beta = 0.5842 * (attenuation - 21) ** 0.4 + 0.07886 * (attenuation - 21.0)
    else:
        beta = 0.0
    window = torch.kaiser_window(taps, periodic=False, beta=beta)
    time = torch.arange(-half, half) + 0.5  # taps centred between samples
    taps_values = 2 * cutoff * window * torch.sinc(2 * cutoff * time)
    return (taps_values / taps_values.sum()).view(1, 1, taps)


class SnakeBeta(nn.Module):
    """``x + sin(a x)^2 / b`` per channel, with ``a = exp(alpha)`` and ``b = exp(beta)``.

    Input and output ``[B, C, T]``; ``alpha`` and ``beta`` ``[C]`` are stored on a log scale.
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = self.alpha.exp()[None, :, None]  # [1, C, 1]
        beta = self.beta.exp()[None, :, None]
        # In place on a fresh tensor: the published x + (1 / (beta + 1e-9)) * sin(x * alpha)**2,
        # bit for bit, with fewer passes over memory.
        return torch.sin(x * alpha).pow_(2).mul_(1.0 / (beta + 1e-9)).add_(x)


class UpSample(nn.Module):
    """Upsample by 2: ``[B, C, T]`` -> ``[B, C, 2T]`` (zero-stuffing and low-pass as a transposed conv)."""

    def __init__(self) -> None:
        super().__init__()
        self.pad = TAPS // RATIO - 1
        self.trim_left = self.pad * RATIO + (TAPS - RATIO) // 2
        self.trim_right = self.pad * RATIO + (TAPS - RATIO + 1) // 2
        self.filter: torch.Tensor
        self.register_buffer("filter", kaiser_sinc_lowpass(0.5 / RATIO, 0.6 / RATIO, TAPS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        channels = x.shape[1]
        x = F.pad(x, (self.pad, self.pad), mode="replicate")
        gain_filter = (RATIO * self.filter).expand(channels, -1, -1)  # exact: RATIO is a power of 2
        x = F.conv_transpose1d(x, gain_filter, stride=RATIO, groups=channels)
        return x[..., self.trim_left : -self.trim_right]


class LowPass(nn.Module):
    """Low-pass and keep every second sample: ``[B, C, T]`` -> ``[B, C, ceil(T / 2)]``."""

    def __init__(self) -> None:
        super().__init__()
        self.pad_left = TAPS // 2 - 1
        self.pad_right = TAPS // 2
        self.filter: torch.Tensor
        self.register_buffer("filter", kaiser_sinc_lowpass(0.5 / RATIO, 0.6 / RATIO, TAPS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        channels = x.shape[1]
        x = F.pad(x, (self.pad_left, self.pad_right), mode="replicate")
        return F.conv1d(x, self.filter.expand(channels, -1, -1), stride=RATIO, groups=channels)


class DownSample(nn.Module):
    """Downsample by 2 (named as in the checkpoint: the filter lives in ``lowpass``)."""

    def __init__(self) -> None:
        super().__init__()
        self.lowpass = LowPass()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lowpass(x)


class AliasFreeSnake(nn.Module):
    """SnakeBeta at twice the rate: ``[B, C, T]`` -> ``[B, C, T]`` (``act``, ``upsample``, ``downsample``)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.act = SnakeBeta(channels)
        self.upsample = UpSample()
        self.downsample = DownSample()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.downsample(self.act(self.upsample(x)))
