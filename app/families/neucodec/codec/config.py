"""Sizes of the NeuCodec decoder, and the optional ``neucodec_config.json`` that records other sizes.

The official checkpoint (``neuphonic/neucodec``) carries no config file: a directory without
``neucodec_config.json`` holds the official sizes. Our fixtures tool writes the file only for
non-official (tiny, random) checkpoints.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CONFIG_FILENAME = "neucodec_config.json"


@dataclass(frozen=True)
class NeuCodecConfig:
    """Decoder sizes; the defaults are those of the official checkpoint.

    hidden_dim: width of the backbone (transformer and resnet channels).
    depth: number of transformer blocks. heads: attention heads (head dim = hidden_dim // heads).
    vq_dim: width of the FSQ projection (``project_out``: len(levels) -> vq_dim).
    levels: FSQ levels; the codebook size is their product (4**8 = 65536 codes).
    hop_length: audio samples per code; the ISTFT uses ``n_fft = 4 * hop_length``.
    """

    hidden_dim: int = 1024
    depth: int = 12
    heads: int = 16
    vq_dim: int = 2048
    levels: tuple[int, ...] = (4,) * 8
    hop_length: int = 480
    sample_rate: int = 24000

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(int(level) for level in self.levels))
        if min(self.hidden_dim, self.depth, self.heads, self.vq_dim, self.hop_length, self.sample_rate) <= 0:
            raise ValueError(f"NeuCodecConfig sizes must be positive: {self}")
        if self.hidden_dim % 32:
            raise ValueError(f"hidden_dim must be a multiple of 32 (GroupNorm groups), got {self.hidden_dim}")
        if self.hidden_dim % self.heads or (self.hidden_dim // self.heads) % 2:
            raise ValueError(
                f"hidden_dim / heads must be an even integer, got {self.hidden_dim}/{self.heads}"
            )
        if not self.levels or min(self.levels) < 2:
            raise ValueError(f"levels must be non-empty and each >= 2, got {self.levels}")

    @classmethod
    def official(cls) -> NeuCodecConfig:
        """The sizes of ``neuphonic/neucodec``."""
        return cls()

    @property
    def n_fft(self) -> int:
        """FFT size (and window length) of the ISTFT head."""
        return 4 * self.hop_length

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden_dim // self.heads

    @property
    def codebook_size(self) -> int:
        """Number of distinct codes: valid codes are 0 .. codebook_size - 1."""
        return math.prod(self.levels)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (levels as a list)."""
        data = asdict(self)
        data["levels"] = list(self.levels)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NeuCodecConfig:
        """Build from ``to_dict`` output; unknown keys are an error, missing keys take official values."""
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown NeuCodecConfig fields: {sorted(unknown)}")
        return cls(**data)


def read_config(directory: Path) -> NeuCodecConfig:
    """The config stored in ``directory``; official sizes when it has no ``neucodec_config.json``."""
    path = Path(directory) / CONFIG_FILENAME
    if not path.is_file():
        return NeuCodecConfig.official()
    return NeuCodecConfig.from_dict(json.loads(path.read_text(encoding="utf-8")))


def write_config(directory: Path, config: NeuCodecConfig) -> Path | None:
    """Write ``neucodec_config.json`` into ``directory`` unless ``config`` is official; return its path."""
    if config == NeuCodecConfig.official():
        return None
    path = Path(directory) / CONFIG_FILENAME
    path.write_text(json.dumps(config.to_dict(), indent=2) + "\n", encoding="utf-8")
    return path
