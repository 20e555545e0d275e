"""MOSS-TTS-Realtime's ``config.json``: the backbone's Qwen3 fields and the local transformer's.

The official file nests ``language_config`` (a Qwen3 config: required here, because transformers' Qwen3
defaults are not Qwen3-1.7B) and ``local_config``. As upstream does, the local transformer's codebook
count (16), audio vocabulary (1027) and pad (1024) are fixed whatever the file says
(``types.CODEBOOKS``, ``AUDIO_VOCAB``, ``AUDIO_PAD``). Parsing loads no model library.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONFIG_FILENAME = "config.json"


@dataclass(frozen=True)
class LocalConfig:
    """The 4-layer local transformer (Qwen3 maths) that emits one frame's 16 codes."""

    hidden_size: int = 2048
    intermediate_size: int = 6144
    num_hidden_layers: int = 4
    num_attention_heads: int = 16
    num_key_value_heads: int = 8
    head_dim: int = 128
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0

    def to_dict(self) -> dict[str, Any]:
        """The ``local_config`` entry of an official ``config.json`` (upstream's field names)."""
        return {
            "model_type": "moss_tts_realtime_local_transformer",
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "rms_norm_eps": self.rms_norm_eps,
            "hidden_act": "silu",
            "max_position_embeddings": 33,
            "rope_theta": self.rope_theta,
            "rope_type": "linear",
            "rope_parameters": {"rope_type": "linear", "rope_theta": self.rope_theta, "factor": 1.0},
            "attention_bias": False,
            "pad_token_id": 1024,
        }


@dataclass(frozen=True)
class MossLMConfig:
    """The whole model: ``language`` is the raw Qwen3 dict (``transformers.Qwen3Config.from_dict``)."""

    language: dict[str, Any]
    local: LocalConfig

    @property
    def hidden_size(self) -> int:
        return int(self.language["hidden_size"])

    @property
    def vocab_size(self) -> int:
        return int(self.language["vocab_size"])

    @property
    def text_pad_id(self) -> int | None:
        """The text embedding's padding row (``language_config.pad_token_id``), if any."""
        value = self.language.get("pad_token_id")
        return None if value is None else int(value)

    @property
    def max_positions(self) -> int:
        """The backbone's window in rows."""
        return int(self.language.get("max_position_embeddings", 40960))

    def to_dict(self) -> dict[str, Any]:
        """An official ``config.json``."""
        return {
            "architectures": ["MossTTSRealtime"],
            "model_type": "moss_tts_realtime",
            "language_config": {"model_type": "qwen3", **self.language},
            "local_config": self.local.to_dict(),
            "rvq": 16,
            "audio_pad_token": 1024,
            "audio_vocab_size": 1027,
        }


def _rope_theta(local: dict[str, Any]) -> float:
    parameters = local.get("rope_parameters") or {}
    rope_type = parameters.get("rope_type", local.get("rope_type", "linear"))
    factor = float(parameters.get("factor", 1.0))
    if rope_type not in ("linear", "default") or factor != 1.0:
        raise ValueError(f"local_config rope {rope_type!r} with factor {factor} is not plain RoPE")
    return float(parameters.get("rope_theta", local.get("rope_theta", 1_000_000.0)))


def parse_config(raw: dict[str, Any]) -> MossLMConfig:
    """Check and read an official config dict; ValueError naming what is wrong."""
    language = raw.get("language_config")
    if not isinstance(language, dict):
        raise ValueError("config.json has no language_config (the Qwen3 backbone's fields)")
    for key in ("hidden_size", "vocab_size", "num_hidden_layers", "num_attention_heads"):
        if key not in language:
            raise ValueError(f"language_config lacks {key}")
    if language.get("layer_types") and any(t != "full_attention" for t in language["layer_types"]):
        raise ValueError("language_config has sliding-window layers; the backbone must attend fully")
    local_raw = raw.get("local_config") or {}
    if not isinstance(local_raw, dict):
        raise ValueError("local_config must be an object")
    if local_raw.get("hidden_act", "silu") != "silu":
        raise ValueError(f"local_config hidden_act {local_raw['hidden_act']!r} is not silu")
    defaults = LocalConfig()
    local = LocalConfig(
        hidden_size=int(local_raw.get("hidden_size", defaults.hidden_size)),
        intermediate_size=int(local_raw.get("intermediate_size", defaults.intermediate_size)),
        num_hidden_layers=int(local_raw.get("num_hidden_layers", defaults.num_hidden_layers)),
        num_attention_heads=int(local_raw.get("num_attention_heads", defaults.num_attention_heads)),
        num_key_value_heads=int(local_raw.get("num_key_value_heads", defaults.num_key_value_heads)),
        head_dim=int(local_raw.get("head_dim", defaults.head_dim)),
        rms_norm_eps=float(local_raw.get("rms_norm_eps", defaults.rms_norm_eps)),
        rope_theta=_rope_theta(local_raw),
    )
    if local.hidden_size != int(language["hidden_size"]):
        raise ValueError(
            f"local hidden_size {local.hidden_size} differs from the backbone's {language['hidden_size']}"
        )
    if local.num_attention_heads % local.num_key_value_heads:
        raise ValueError("local num_attention_heads must be a multiple of num_key_value_heads")
    return MossLMConfig(language=dict(language), local=local)


def read_config(directory: Path) -> MossLMConfig:
    """``parse_config`` of ``directory/config.json``."""
    return parse_config(json.loads((directory / CONFIG_FILENAME).read_text(encoding="utf-8")))


OFFICIAL_LANGUAGE: dict[str, Any] = {
    "vocab_size": 151936,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "hidden_act": "silu",
    "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1_000_000.0,
    "attention_bias": False,
    "tie_word_embeddings": True,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "pad_token_id": 151643,
}
"""Qwen3-1.7B's backbone fields, the sizes of the released checkpoint (benchmarks, key-name tests)."""


def official_config() -> MossLMConfig:
    """The released model's sizes."""
    return MossLMConfig(language=dict(OFFICIAL_LANGUAGE), local=LocalConfig())
