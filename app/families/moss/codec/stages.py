"""The encoder and decoder stage lists (keys ``encoder.{i}`` / ``decoder.{i}``; patches are weightless)."""

from __future__ import annotations

import torch
from torch import nn

from app.families.moss.codec.config import PatchStage, Stage
from app.families.moss.codec.transformer import Patch, ProjectedTransformer, Segment, StageCache


def _build(stages: tuple[Stage, ...], down: bool) -> list[nn.Module]:
    return [
        Patch(s.patch_size, down) if isinstance(s, PatchStage) else ProjectedTransformer(s) for s in stages
    ]


class StageStack(nn.ModuleList):
    """Stages in execution order on packed ``[N, C]`` rows, each sequence's length scaled by the patches."""

    def __init__(self, stages: tuple[Stage, ...], down: bool) -> None:
        super().__init__(_build(stages, down))
        self.down = down

    def transformers(self) -> list[ProjectedTransformer]:
        return [m for m in self if isinstance(m, ProjectedTransformer)]

    def positions_per_frame(self) -> list[int]:
        """For each decoder transformer, its positions per codec frame (1, 2, 4, 8)."""
        if self.down:
            raise ValueError("the encoder runs one-shot only: it has no streaming caches")
        rates, rate = [], 1
        for module in self:
            if isinstance(module, Patch):
                rate *= module.patch_size
            else:
                rates.append(rate)
        return rates

    def new_caches(self, max_step_frames: int, device: torch.device, dtype: torch.dtype) -> list[StageCache]:
        """Fresh per-sequence caches of every transformer (decoder streaming)."""
        return [
            t.new_cache(rate * max_step_frames, device, dtype)
            for t, rate in zip(self.transformers(), self.positions_per_frame(), strict=True)
        ]

    def forward(
        self, x: torch.Tensor, lengths: list[int], caches: list[list[StageCache]] | None = None
    ) -> torch.Tensor:
        """``x [sum(lengths), C_in]`` -> ``[sum(lengths) * scale, C_out]``. ``caches[b]`` are sequence b's
        stage caches (streaming); None runs every sequence one-shot from position 0."""
        k = 0
        for module in self:
            if isinstance(module, Patch):
                x = module(x)
                h = module.patch_size
                lengths = [n // h if self.down else n * h for n in lengths]
                continue
            segments = [
                Segment(n, caches[b][k] if caches is not None else None) for b, n in enumerate(lengths)
            ]
            assert isinstance(module, ProjectedTransformer)  # a stage is a patch or a transformer
            x = module(x.to(module.dtype), segments)  # the boundary cast of a reduced-precision decoder
            k += 1
        return x
