"""Sizes of the NeuCodec encoder, and the optional ``neucodec_encoder_config.json`` that records other sizes.

The official checkpoint carries no encoder config: its semantic model is ``facebook/w2v-bert-2.0``
(weights inside NeuCodec's own ``pytorch_model.bin`` under ``semantic_model.*``, so nothing else is
downloaded) and its acoustic encoder has fixed sizes. A directory without the file holds the official
sizes; our fixtures tool writes the file only for tiny random checkpoints. The decoder's sizes stay in
``neucodec_config.json`` (``NeuCodecConfig``), which ``load_decoder`` reads unchanged.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import Wav2Vec2BertConfig

ENCODER_CONFIG_FILENAME = "neucodec_encoder_config.json"
SAMPLE_RATE = 16_000  # the encoder's input rate
SAMPLES_PER_CODE = 320  # 20 ms at 16 kHz: one code per w2v-bert frame (10 ms hop, stacked by 2)

# The architecture values of facebook/w2v-bert-2.0's config.json; they equal transformers'
# ``Wav2Vec2BertConfig`` defaults (a test pins that). Dropout and spec-augment only matter in training.
OFFICIAL_SEMANTIC: dict[str, Any] = {
    "hidden_size": 1024,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "feature_projection_input_dim": 160,
    "hidden_act": "swish",
    "layer_norm_eps": 1e-5,
    "position_embeddings_type": "relative_key",
    "left_max_position_embeddings": 64,
    "right_max_position_embeddings": 8,
    "conv_depthwise_kernel_size": 31,
    "add_adapter": False,
    "use_intermediate_ffn_before_adapter": False,
    "mask_time_prob": 0.05,
}


@dataclass(frozen=True)
class NeuCodecEncoderConfig:
    """Encoder sizes; the defaults are those of the official checkpoint.

    semantic: Wav2Vec2BertConfig fields of the semantic model as the checkpoint stores it (all layers).
    semantic_hidden_state: which ``hidden_states`` entry NeuCodec reads (16: the output of layer 16);
        only that many layers are built, the rest of the checkpoint's layers are skipped.
    semantic_dim: width of ``SemanticEncoder_module`` (its hidden and output channels).
    acoustic_channels: width of the first ``CodecEnc`` conv; each strided block doubles it.
    acoustic_strides: the strided blocks' strides; their product is 320 samples (one code at 16 kHz).
    acoustic_dilations: dilations of the residual units inside each block.
    acoustic_dim: ``CodecEnc`` output width. ``semantic_dim + acoustic_dim`` must be the codec's vq_dim.
    """

    semantic: dict[str, Any] = field(default_factory=lambda: dict(OFFICIAL_SEMANTIC))
    semantic_hidden_state: int = 16
    semantic_dim: int = 1024
    acoustic_channels: int = 48
    acoustic_strides: tuple[int, ...] = (2, 2, 4, 4, 5)
    acoustic_dilations: tuple[int, ...] = (1, 3, 9)
    acoustic_dim: int = 1024

    def __post_init__(self) -> None:
        object.__setattr__(self, "semantic", {**OFFICIAL_SEMANTIC, **self.semantic})
        object.__setattr__(self, "acoustic_strides", tuple(int(s) for s in self.acoustic_strides))
        object.__setattr__(self, "acoustic_dilations", tuple(int(d) for d in self.acoustic_dilations))
        if min(self.semantic_dim, self.acoustic_channels, self.acoustic_dim, *self.acoustic_dilations) <= 0:
            raise ValueError(f"NeuCodecEncoderConfig sizes must be positive: {self}")
        if math.prod(self.acoustic_strides) != SAMPLES_PER_CODE or min(self.acoustic_strides) < 1:
            raise ValueError(f"acoustic_strides must multiply to {SAMPLES_PER_CODE}: {self.acoustic_strides}")
        layers = int(self.semantic["num_hidden_layers"])
        if not 1 <= self.semantic_hidden_state <= layers:
            raise ValueError(f"semantic_hidden_state must be in 1..{layers}: {self.semantic_hidden_state}")
        if self.semantic["feature_projection_input_dim"] != 160:
            raise ValueError("feature_projection_input_dim must be 160 (80 mel bins stacked by 2)")
        if self.semantic["add_adapter"] or self.semantic["use_intermediate_ffn_before_adapter"]:
            raise ValueError("NeuCodec reads encoder hidden states: no adapter or intermediate ffn")

    @classmethod
    def official(cls) -> NeuCodecEncoderConfig:
        """The sizes of ``neuphonic/neucodec``'s encoder."""
        return cls()

    @property
    def semantic_width(self) -> int:
        """Width of the w2v-bert hidden states (input of ``SemanticEncoder_module``)."""
        return int(self.semantic["hidden_size"])

    def semantic_config(self, *, as_stored: bool = False) -> Wav2Vec2BertConfig:
        """The w2v-bert config: what we build (default) or what the checkpoint stores (``as_stored``).

        We build ``semantic_hidden_state`` layers without the spec-augment vector (training only),
        with eager attention, the attention the checkpoint was trained with in transformers 4.x.
        """
        from transformers import Wav2Vec2BertConfig

        values = dict(self.semantic)
        if not as_stored:
            values.update(num_hidden_layers=self.semantic_hidden_state, mask_time_prob=0.0)
        config = Wav2Vec2BertConfig(**values)
        config._attn_implementation = "eager"  # what the attn_implementation argument sets
        return config

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (tuples as lists)."""
        return {
            "semantic": dict(self.semantic),
            "semantic_hidden_state": self.semantic_hidden_state,
            "semantic_dim": self.semantic_dim,
            "acoustic_channels": self.acoustic_channels,
            "acoustic_strides": list(self.acoustic_strides),
            "acoustic_dilations": list(self.acoustic_dilations),
            "acoustic_dim": self.acoustic_dim,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NeuCodecEncoderConfig:
        """Build from ``to_dict`` output; unknown keys are an error, missing keys take official values."""
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown NeuCodecEncoderConfig fields: {sorted(unknown)}")
        return cls(**data)


def read_encoder_config(directory: Path) -> NeuCodecEncoderConfig:
    """The encoder config stored in ``directory``; official sizes when it has no config file."""
    path = Path(directory) / ENCODER_CONFIG_FILENAME
    if not path.is_file():
        return NeuCodecEncoderConfig.official()
    return NeuCodecEncoderConfig.from_dict(json.loads(path.read_text(encoding="utf-8")))


def write_encoder_config(directory: Path, config: NeuCodecEncoderConfig) -> Path | None:
    """Write the encoder config into ``directory`` unless ``config`` is official; return its path."""
    if config == NeuCodecEncoderConfig.official():
        return None
    path = Path(directory) / ENCODER_CONFIG_FILENAME
    path.write_text(json.dumps(config.to_dict(), indent=2) + "\n", encoding="utf-8")
    return path
