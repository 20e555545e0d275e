"""NeuCodecDecoder: speech codes -> 24 kHz audio, with the official checkpoint's decoder key layout.

Parameter names follow ``neuphonic/neucodec``'s ``pytorch_model.bin`` so the decoder part loads with
strict key matching: ``fc_post_a.*``, ``generator.quantizer.project_in/out.*``,
``generator.backbone.*`` and ``generator.head.*``.
"""

from __future__ import annotations

import torch
from torch import nn

from app.families.neucodec.codec.backbone import Backbone
from app.families.neucodec.codec.config import NeuCodecConfig
from app.families.neucodec.codec.fsq import FSQLookup
from app.families.neucodec.codec.istft import ISTFTHead
from app.families.neucodec.codec.packed import Packing


class Generator(nn.Module):
    """The ``generator`` sub-tree: FSQ quantizer, backbone and ISTFT head (named as in the checkpoint)."""

    def __init__(self, config: NeuCodecConfig) -> None:
        super().__init__()
        self.quantizer = FSQLookup(config.vq_dim, config.levels)
        self.backbone = Backbone(config.hidden_dim, config.depth, config.heads)
        self.head = ISTFTHead(config.hidden_dim, config.n_fft, config.hop_length)


class NeuCodecDecoder(nn.Module):
    """Decode path of NeuCodec.

    codes ``[B, T]`` -> FSQ lookup ``[B, T, vq_dim]`` -> ``fc_post_a`` ``[B, T, hidden_dim]``
    -> backbone ``[B, T, hidden_dim]`` -> ISTFT head ``[B, T * hop_length]``.
    Items of a batch never mix (per-item norms, attention over each item's own frames), so a batch
    of equal-length items decodes to what each item decodes to alone.
    """

    def __init__(self, config: NeuCodecConfig) -> None:
        super().__init__()
        self.config = config
        self.fc_post_a = nn.Linear(config.vq_dim, config.hidden_dim)
        self.generator = Generator(config)

    def cast(self, dtype: torch.dtype) -> NeuCodecDecoder:
        """Run the network in ``dtype`` (bf16/fp16 for throughput). Only the weights are cast: buffers
        (the rotary tables, the ISTFT window) and the ISTFT stay float32, so the output is float32 audio
        either way. Returns self."""
        for parameter in self.parameters():
            parameter.data = parameter.data.to(dtype)
        return self

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """``[B, T]`` int codes (already validated, on this module's device) -> ``[B, T * hop]`` audio."""
        x = self.fc_post_a(self.generator.quantizer(codes))  # [B, T, hidden_dim]
        x = self.generator.backbone(x)  # [B, T, hidden_dim]
        return self.generator.head(x)

    def forward_packed(self, codes: torch.Tensor, lengths: list[int]) -> list[torch.Tensor]:
        """Windows of ``lengths`` codes packed back to back, ``[N]`` int codes (already validated, on this
        module's device) -> each window's ``[T_i * hop]`` audio, as each decodes alone
        (``app.families.neucodec.codec.packed``)."""
        x = self.fc_post_a(self.generator.quantizer(codes[None]))  # [1, N, hidden_dim]
        packing = Packing(lengths, codes.device, x.dtype)
        x = self.generator.backbone(x, packing)  # [1, N, hidden_dim]
        projected = self.generator.head.out(x)  # [1, N, n_fft + 2]
        return [self.generator.head.waveform(part)[0] for part in packing.split(projected)]

    @torch.inference_mode()
    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Decode integer codes ``[B, T]`` in [0, codebook_size) to float audio ``[B, T * hop_length]``.

        ``codes`` may live on any device; it is checked there and moved to the module's device.
        Raises ValueError for a wrong shape, a non-integer dtype or a code out of range.
        """
        if codes.dim() != 2:
            raise ValueError(f"codes must have shape [B, T], got {tuple(codes.shape)}")
        if codes.dtype.is_floating_point or codes.dtype.is_complex or codes.dtype == torch.bool:
            raise ValueError(f"codes must be an integer tensor, got {codes.dtype}")
        weight = self.fc_post_a.weight
        batch, time = codes.shape
        if time == 0:
            return torch.zeros(batch, 0, device=weight.device)
        low, high = int(codes.min()), int(codes.max())
        if low < 0 or high >= self.config.codebook_size:
            bad = low if low < 0 else high
            raise ValueError(f"speech code {bad} is out of range [0, {self.config.codebook_size - 1}]")
        return self(codes.to(device=weight.device, dtype=torch.long))
