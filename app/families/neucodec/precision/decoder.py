"""The NeuCodec decoder as a precision part: fixed random codes -> per-layer activations and audio.

Sources: a checkpoint directory or Hugging Face id (``load_decoder``), ``random:official`` (the
full-size decoder with the fixtures tool's random weights, seed 0, built in memory) or
``random:tiny`` (the tiny test decoder). Outputs, in order: ``fc_post_a`` ``[T, hidden]``, each
backbone transformer block ``transformer.NN`` ``[T, hidden]``, the backbone ``[T, hidden]`` and
``audio`` ``[T * hop]``. Attention ``sdpa_fp32`` computes the blocks' attention in float32.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import torch

from app.core.device import resolve_device, set_current
from app.families.neucodec.codec.config import NeuCodecConfig, read_config
from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.codec.transformer import Attention
from app.families.shared.precision_part import RANDOM_PREFIX, Kind, as_output, capture, release
from app.families.shared.run_config import RunConfig


def _random_config(source: str) -> NeuCodecConfig:
    from app.families.neucodec.fixtures.codec import TINY_CODEC_CONFIG

    configs = {"official": NeuCodecConfig.official(), "tiny": TINY_CODEC_CONFIG}
    size = source.removeprefix(RANDOM_PREFIX)
    if size not in configs:
        raise ValueError(f"unknown random decoder {source!r}: use random:official or random:tiny")
    return configs[size]


def _config(source: str) -> NeuCodecConfig:
    if source.startswith(RANDOM_PREFIX):
        return _random_config(source)
    if Path(source).is_dir():
        return read_config(Path(source))
    return _load(source).config


def _load(source: str) -> NeuCodecDecoder:
    """The float32 decoder of ``source`` on the CPU."""
    if source.startswith(RANDOM_PREFIX):
        from app.families.neucodec.fixtures.codec import random_decoder

        return random_decoder(_random_config(source), seed=0)
    from app.families.neucodec.codec.loading import load_decoder

    return load_decoder(source)


class NeuCodecDecoderPart:
    """``neucodec-decoder``: see the module docstring."""

    name: ClassVar[str] = "neucodec-decoder"
    kind: ClassVar[Kind] = "codec"
    description: ClassVar[str] = (
        "NeuCodec decoder: codes -> per-layer activations and 24 kHz audio; random:official, random:tiny"
    )
    default_length: ClassVar[int] = 250

    def make_inputs(
        self, source: str, seed: int, length: int
    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        config = _config(source)
        generator = torch.Generator().manual_seed(seed)
        codes = torch.randint(0, config.codebook_size, (1, length), generator=generator)
        return {"codes": codes}, {"sample_rate": config.sample_rate, "seed": seed}

    def run(
        self, source: str, config: RunConfig, inputs: dict[str, torch.Tensor], options: dict[str, Any]
    ) -> dict[str, torch.Tensor]:
        if config.attention == "eager":
            raise ValueError("the NeuCodec decoder has one attention kernel: use sdpa or sdpa_fp32")
        device = resolve_device(config.device)
        set_current(device)
        decoder = _load(source).to(device)
        if config.dtype != "float32":
            decoder.cast(config.torch_dtype)
        for module in decoder.modules():
            if isinstance(module, Attention):
                module.float32_attention = config.attention == "sdpa_fp32"
        backbone = decoder.generator.backbone
        modules: dict[str, torch.nn.Module] = {"fc_post_a": decoder.fc_post_a}
        modules |= {f"transformer.{i:02d}": block for i, block in enumerate(backbone.transformers)}
        modules["backbone"] = backbone
        with capture(modules) as captured:
            audio = decoder.decode(inputs["codes"].to(device))
        outputs = {name: captured[name] for name in modules} | {"audio": as_output(audio)}
        del decoder
        release(device)
        return outputs
