"""The MOSS-Audio-Tokenizer config: the official ``config.json`` parsed into typed stages.

The official file lists the encoder and the decoder as stage dicts (``module_type`` "PatchedPretransform"
or "Transformer") in execution order, and the residual-LFQ bottleneck as ``quantizer_kwargs``. Each
transformer attends over a causal window of ``int(stage frame rate * causal_transformer_context_duration)``
positions, the stage frame rate being the sample rate divided by the patch sizes met so far (encoder),
then multiplied back (decoder). Keys the model never reads (``code_dim``, ``reversed_decoder_kwargs``,
``version``, ...) are kept when writing but ignored when reading. Only the variants the published
checkpoint uses are supported (causal, layer norm, no gating, RoPE, rlfq); others fail with the field named.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG_FILENAME = "config.json"


@dataclass(frozen=True)
class PatchStage:
    """A reshape between rates: ``patch_size`` time steps <-> channels (down: encoder, up: decoder)."""

    patch_size: int


@dataclass(frozen=True)
class TransformerStage:
    """A causal transformer with input/output projections (Identity where the width already fits).

    Works on ``[positions, input_dim]`` -> ``[positions, output_dim]``; ``context`` is its attention window
    in positions (filled in from the stage's frame rate).
    """

    input_dim: int
    output_dim: int
    d_model: int
    num_heads: int
    num_layers: int
    dim_feedforward: int
    layer_scale: float = 0.01
    max_period: float = 10000.0
    context: int = 0

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


Stage = PatchStage | TransformerStage


@dataclass(frozen=True)
class QuantizerConfig:
    """Residual LFQ: ``input_dim`` -> ``rvq_dim`` residual, ``num_quantizers`` stages of
    ``codebook_size`` x ``codebook_dim`` codebooks, back to ``output_dim``."""

    input_dim: int = 768
    rvq_dim: int = 512
    output_dim: int = 768
    num_quantizers: int = 32
    codebook_size: int = 1024
    codebook_dim: int = 8


@dataclass(frozen=True)
class MossCodecConfig:
    """The whole codec. ``raw`` keeps the parsed JSON so ``write_config`` reproduces the file's extra keys."""

    encoder: tuple[Stage, ...]
    decoder: tuple[Stage, ...]
    quantizer: QuantizerConfig
    sampling_rate: int = 24000
    downsample_rate: int = 1920
    context_duration: float = 10.0
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        down = math.prod(s.patch_size for s in self.encoder if isinstance(s, PatchStage))
        up = math.prod(s.patch_size for s in self.decoder if isinstance(s, PatchStage))
        if down != self.downsample_rate or up != self.downsample_rate:
            raise ValueError(
                f"patch sizes multiply to {down} (encoder) and {up} (decoder), "
                f"but downsample_rate is {self.downsample_rate}"
            )

    @property
    def frame_rate(self) -> float:
        """Frames per second (12.5 for the official codec)."""
        return self.sampling_rate / self.downsample_rate

    @property
    def num_quantizers(self) -> int:
        return self.quantizer.num_quantizers

    @property
    def codebook_size(self) -> int:
        return self.quantizer.codebook_size

    @property
    def context_frames(self) -> int:
        """Frames of the codec's attention context (125 for 10 s at 12.5 Hz)."""
        return int(self.frame_rate * self.context_duration)

    @classmethod
    def official(cls) -> MossCodecConfig:
        """The configuration of ``OpenMOSS-Team/MOSS-Audio-Tokenizer`` (its ``config.json``)."""
        return from_dict(official_dict())

    def to_dict(self) -> dict[str, Any]:
        """The official JSON layout (extra keys of the file it was read from are kept)."""
        data = dict(self.raw)
        data.update(
            {
                "sampling_rate": self.sampling_rate,
                "sample_rate": self.sampling_rate,
                "downsample_rate": self.downsample_rate,
                "causal_transformer_context_duration": self.context_duration,
                "encoder_kwargs": [_stage_dict(s) for s in self.encoder],
                "decoder_kwargs": [_stage_dict(s) for s in self.decoder],
                "quantizer_type": "rlfq",
                "quantizer_kwargs": {**vars(self.quantizer), "quantizer_type": "rlfq"},
            }
        )
        return data


def _transformer_dict(
    input_dim: int, output_dim: int, d_model: int, heads: int, layers: int, ff: int, layer_scale: float
) -> dict[str, Any]:
    return {
        "causal": True,
        "conv_layout": True,
        "d_model": d_model,
        "dim_feedforward": ff,
        "gating": "none",
        "input_dimension": input_dim,
        "layer_scale": layer_scale,
        "max_period": 10000,
        "module_type": "Transformer",
        "norm": "layer_norm",
        "num_heads": heads,
        "num_layers": layers,
        "output_dimension": output_dim,
        "positional_embedding": "rope",
    }


def _patch_dict(size: int) -> dict[str, Any]:
    return {"module_type": "PatchedPretransform", "patch_size": size}


def layout_dict(
    encoder_dims: tuple[int, int, int, int],
    decoder_dims: tuple[int, int, int],
    widths: tuple[int, int],
    heads: tuple[int, int],
    layers: tuple[int, int],
    quantizer: QuantizerConfig,
    layer_scale: float = 0.01,
    context_duration: float = 10.0,
) -> dict[str, Any]:
    """A config dict with the official stage structure (patches 240, 2, 2, 2; four transformers a side).

    ``encoder_dims``: output widths of encoder transformers 1, 3, 5, 7 (the last is the quantizer input).
    ``decoder_dims``: output widths of decoder transformers 0, 2, 4 (transformer 6 outputs 240).
    ``widths``/``heads``/``layers``: (d_model, ...) of the three 12.5 Hz-adjacent stages vs the outer one:
    index 0 for the stages next to the bottleneck (encoder 7, decoder 0), index 1 for the others.
    """
    (e1, e3, e5, e7), (d0, d2, d4) = encoder_dims, decoder_dims
    inner, outer = (widths[0], heads[0], layers[0]), (widths[1], heads[1], layers[1])
    ff_in, ff_out = 4 * inner[0], 4 * outer[0]

    def t(i: int, o: int, size: tuple[int, int, int], ff: int) -> dict[str, Any]:
        return _transformer_dict(i, o, size[0], size[1], size[2], ff, layer_scale)

    encoder = [
        _patch_dict(240),
        t(240, e1, outer, ff_out),
        _patch_dict(2),
        t(2 * e1, e3, outer, ff_out),
        _patch_dict(2),
        t(2 * e3, e5, outer, ff_out),
        _patch_dict(2),
        t(2 * e5, e7, inner, ff_in),
    ]
    decoder = [
        t(quantizer.output_dim, d0, inner, ff_in),
        _patch_dict(2),
        t(d0 // 2, d2, outer, ff_out),
        _patch_dict(2),
        t(d2 // 2, d4, outer, ff_out),
        _patch_dict(2),
        t(d4 // 2, 240, outer, ff_out),
        _patch_dict(240),
    ]
    return {
        "architectures": ["MossAudioTokenizerModel"],
        "auto_map": {
            "AutoConfig": "configuration_moss_audio_tokenizer.MossAudioTokenizerConfig",
            "AutoModel": "modeling_moss_audio_tokenizer.MossAudioTokenizerModel",
        },
        "causal_transformer_context_duration": context_duration,
        "code_dim": quantizer.output_dim,
        "decoder_kwargs": decoder,
        "downsample_rate": 1920,
        "dtype": "float32",
        "encoder_kwargs": encoder,
        "model_type": "speech_tokenizer",
        "quantizer_kwargs": {**vars(quantizer), "quantizer_type": "rlfq"},
        "quantizer_type": "rlfq",
        "reversed_decoder_kwargs": json.loads(json.dumps(encoder)),
        "sample_rate": 24000,
        "sampling_rate": 24000,
        "version": "4.26.1.a",
    }


def official_dict() -> dict[str, Any]:
    """The official ``config.json`` content (values from OpenMOSS/MOSS-Audio-Tokenizer)."""
    return layout_dict(
        encoder_dims=(384, 384, 640, 768),
        decoder_dims=(1280, 768, 768),
        widths=(1280, 768),
        heads=(20, 12),
        layers=(32, 12),
        quantizer=QuantizerConfig(),
    )


def _stage_dict(stage: Stage) -> dict[str, Any]:
    if isinstance(stage, PatchStage):
        return _patch_dict(stage.patch_size)
    return _transformer_dict(
        stage.input_dim,
        stage.output_dim,
        stage.d_model,
        stage.num_heads,
        stage.num_layers,
        stage.dim_feedforward,
        stage.layer_scale,
    ) | {"max_period": stage.max_period}


_REQUIRED = {"causal": True, "norm": "layer_norm", "gating": "none", "positional_embedding": "rope"}


def _parse_stage(data: dict[str, Any], where: str, rate: float, duration: float) -> Stage:
    kind = data.get("module_type")
    if kind == "PatchedPretransform":
        return PatchStage(int(data["patch_size"]))
    if kind != "Transformer":
        raise ValueError(f"{where}: unknown module_type {kind!r}")
    for key, wanted in _REQUIRED.items():
        if data.get(key, wanted) != wanted:
            raise ValueError(f"{where}: {key}={data[key]!r} is not supported (only {wanted!r})")
    if data["d_model"] % data["num_heads"] or (data["d_model"] // data["num_heads"]) % 2:
        raise ValueError(f"{where}: d_model / num_heads must be an even integer")
    return TransformerStage(
        input_dim=int(data["input_dimension"]),
        output_dim=int(data["output_dimension"]),
        d_model=int(data["d_model"]),
        num_heads=int(data["num_heads"]),
        num_layers=int(data["num_layers"]),
        dim_feedforward=int(data["dim_feedforward"]),
        layer_scale=float(data.get("layer_scale", 0.01)),
        max_period=float(data.get("max_period", 10000)),
        context=int(rate * duration),  # the official rounding: int(stage frame rate x seconds)
    )


def from_dict(data: dict[str, Any]) -> MossCodecConfig:
    """Parse an official-layout config dict. Raises ValueError naming the offending field."""
    qkw = dict(data.get("quantizer_kwargs") or {})
    qtype = qkw.pop("quantizer_type", data.get("quantizer_type", "rlfq"))
    if qtype not in {"rlfq", "random_prefix_rlfq"}:
        raise ValueError(f"quantizer_type {qtype!r} is not supported (only 'rlfq')")
    quantizer = QuantizerConfig(
        **{k: int(v) for k, v in qkw.items() if k in QuantizerConfig.__dataclass_fields__ and v is not None}
    )
    rate = float(data.get("sampling_rate", data.get("sample_rate", 24000)))
    duration = float(data.get("causal_transformer_context_duration", 10.0))
    encoder: list[Stage] = []
    for i, stage_data in enumerate(data["encoder_kwargs"]):
        stage = _parse_stage(stage_data, f"encoder_kwargs[{i}]", rate, duration)
        encoder.append(stage)
        rate /= stage.patch_size if isinstance(stage, PatchStage) else 1
    decoder: list[Stage] = []
    for i, stage_data in enumerate(data["decoder_kwargs"]):
        stage = _parse_stage(stage_data, f"decoder_kwargs[{i}]", rate, duration)
        decoder.append(stage)
        rate *= stage.patch_size if isinstance(stage, PatchStage) else 1
    return MossCodecConfig(
        encoder=tuple(encoder),
        decoder=tuple(decoder),
        quantizer=quantizer,
        sampling_rate=int(data.get("sampling_rate", data.get("sample_rate", 24000))),
        downsample_rate=int(data.get("downsample_rate", 1920)),
        context_duration=duration,
        raw=data,
    )


def read_config(directory: Path) -> MossCodecConfig:
    """The ``config.json`` in ``directory`` (required: the official repo ships one)."""
    path = Path(directory) / CONFIG_FILENAME
    if not path.is_file():
        raise FileNotFoundError(f"no {CONFIG_FILENAME} in {directory}")
    return from_dict(json.loads(path.read_text(encoding="utf-8")))


def write_config(directory: Path, config: MossCodecConfig) -> Path:
    """Write ``config.json`` in the official layout into ``directory``; return its path."""
    path = Path(directory) / CONFIG_FILENAME
    path.write_text(json.dumps(config.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
