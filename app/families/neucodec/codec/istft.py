"""ISTFT head of NeuCodec: hidden frames -> magnitude/phase spectrum -> waveform, "same" padding.

``torch.istft`` only supports ``center=True`` padding with a window; NeuCodec (like Vocos) trims
``(n_fft - hop) / 2`` samples on each side instead, so every code maps to exactly ``hop`` samples.
"""

from __future__ import annotations

import torch
from torch import nn

MAX_MAGNITUDE = 1e2


class ISTFT(nn.Module):
    """Inverse STFT with "same" padding and a Hann window (``window`` is a checkpoint buffer).

    Input: complex spectrum ``[B, T, n_fft // 2 + 1]``. Output: ``[B, T * hop_length]``.
    Each frame is ``irfft`` * window; frames are overlap-added ``hop_length`` apart, trimmed by
    ``(n_fft - hop_length) // 2`` on each side and divided by the summed squared window.
    """

    def __init__(self, n_fft: int, hop_length: int) -> None:
        super().__init__()
        if n_fft % hop_length:
            raise ValueError(f"n_fft ({n_fft}) must be a multiple of hop_length ({hop_length})")
        self.n_fft = n_fft
        self.hop_length = hop_length
        self.window: torch.Tensor
        self.register_buffer("window", torch.hann_window(n_fft))

    def _overlap_add(self, frames: torch.Tensor) -> torch.Tensor:
        """``[..., T, n_fft]`` frames -> ``[..., (T - 1) * hop + n_fft]`` summed at ``hop`` strides."""
        *lead, time, _ = frames.shape
        overlap = self.n_fft // self.hop_length
        pieces = frames.unflatten(-1, (overlap, self.hop_length))  # [..., T, R, hop]
        out = frames.new_zeros(*lead, time + overlap - 1, self.hop_length)  # [..., T + R - 1, hop]
        for r in range(overlap):
            out[..., r : r + time, :] += pieces[..., r, :]
        return out.flatten(-2)

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        time = spec.shape[-2]
        frames = torch.fft.irfft(spec, n=self.n_fft, dim=-1) * self.window  # [B, T, n_fft]
        audio = self._overlap_add(frames)  # [B, (T - 1) * hop + n_fft]
        envelope = self._overlap_add(self.window.square().expand(time, -1))  # [(T - 1) * hop + n_fft]
        pad = (self.n_fft - self.hop_length) // 2
        end = pad + time * self.hop_length
        return audio[..., pad:end] / envelope[pad:end]


class ISTFTHead(nn.Module):
    """``out`` projects hidden frames to log-magnitude and phase; ``istft`` makes the waveform.

    Input: ``[B, T, hidden_dim]`` in the module's dtype. Output: ``[B, T * hop_length]`` float32: the
    spectrum and the ISTFT are computed in float32 whatever the weights' dtype (bf16 has no complex type,
    and exp() of a bf16 log-magnitude would cost the audio its precision).
    """

    def __init__(self, hidden_dim: int, n_fft: int, hop_length: int) -> None:
        super().__init__()
        self.out = nn.Linear(hidden_dim, n_fft + 2)
        self.istft = ISTFT(n_fft, hop_length)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.waveform(self.out(x))

    @torch.compiler.disable
    def waveform(self, projected: torch.Tensor) -> torch.Tensor:
        """``[B, T, n_fft + 2]`` -> ``[B, T * hop_length]``. Left out of ``torch.compile`` (TORCH_COMPILE):
        inductor generates no code for complex operators, and the ISTFT is a small share of the decoder."""
        log_mag, phase = projected.float().chunk(2, dim=-1)  # each [B, T, n_fft // 2 + 1]
        mag = log_mag.exp().clamp(max=MAX_MAGNITUDE)
        spec = torch.complex(mag * phase.cos(), mag * phase.sin())
        return self.istft(spec)
