"""A configuration to run a part on: device, dtype and attention implementation.

Written ``DEVICE,DTYPE[,ATTENTION]`` on the command line, e.g. ``cpu,float32``, ``npu:0,bfloat16,sdpa``
or ``cuda,bfloat16,sdpa_fp32``. ``ATTENTION`` is ``sdpa`` (the default), ``eager`` (the LM only) or
``sdpa_fp32``: attention computed in float32 on the dtype's q, k and v, its output rounded back
(``app/lm/attention.py``; on the codec, the same for its own attention).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
ATTENTIONS = ("sdpa", "eager", "sdpa_fp32")
_SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
_DEVICE_RE = re.compile(r"(cpu|cuda|npu)(?::\d+)?")


@dataclass(frozen=True)
class RunConfig:
    """Where and how a part runs. ``label`` names it in tables and file names."""

    device: str = "cpu"
    dtype: str = "float32"
    attention: str = "sdpa"

    def __post_init__(self) -> None:
        if not _DEVICE_RE.fullmatch(self.device):
            raise ValueError(f"unknown device {self.device!r}: use cpu, cuda[:N] or npu[:N]")
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}: use one of {', '.join(DTYPES)}")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {self.attention!r}: use one of {', '.join(ATTENTIONS)}")

    @classmethod
    def parse(cls, text: str) -> RunConfig:
        """``DEVICE,DTYPE[,ATTENTION]`` -> a config (ValueError when malformed)."""
        fields = [item.strip() for item in text.split(",")]
        if not 2 <= len(fields) <= 3 or not all(fields):
            raise ValueError(f"config {text!r} is not DEVICE,DTYPE[,ATTENTION] (e.g. cpu,bfloat16,sdpa)")
        return cls(*fields)

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def label(self) -> str:
        """Short name, e.g. ``cpu-bf16-sdpa_fp32``."""
        return f"{self.device.replace(':', '')}-{_SHORT[self.dtype]}-{self.attention}"

    def spec(self) -> str:
        """The command-line form (``parse(config.spec()) == config``)."""
        return f"{self.device},{self.dtype},{self.attention}"
