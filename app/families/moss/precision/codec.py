"""The MOSS-Audio-Tokenizer (the MOSS-TTS-Realtime codec) as a precision part: encoder and decoder.

Inputs (seeded): ``audio`` ``[frames * 1920]``, a voiced, speech-like 24 kHz signal (a gliding pitch with
its harmonics shaped by three formants, syllable-rate loudness, a little breath noise) for the encoder,
and ``codes`` ``[frames, 16]``, random codes in the 16 codebooks MOSS-TTS-Realtime reads, for the decoder
(the decoder's input must be the same in every configuration, so it does not take the encoder's codes).

Outputs, in computation order: each encoder transformer stage ``encoder.N`` ``[positions, width]`` (N its
index in the checkpoint's stage list; 12.5 Hz x 8, 4, 2, 1 positions a second), the encoder's ``codes``
``[frames, 32]`` (integer: compared by the share of identical codes per codebook), each decoder
transformer stage ``decoder.N`` and the decoded ``audio`` ``[frames * 1920]``.

Sources: a checkpoint directory or Hugging Face id (``load_codec``), ``random:official`` (the full-size
codec with the fixtures tool's random weights, seed 0, built in memory: about 7 GB in float32) or
``random:tiny`` (the tiny test codec). The dtype applies to the transformer stages, as
``MOSS_CODEC_DTYPE`` does in the server; the quantizer runs in float32. The codec's attention has one
implementation (``sdpa``); a float32-attention variant needs a flag on its ``Attention`` first.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar

import torch

from app.core.device import resolve_device, set_current
from app.families.moss.codec.config import MossCodecConfig, read_config
from app.families.moss.codec.model import MossAudioCodec
from app.families.moss.codec.transformer import ProjectedTransformer
from app.families.shared.precision_part import RANDOM_PREFIX, Kind, as_output, capture, release
from app.families.shared.run_config import RunConfig

DECODE_CODEBOOKS = 16
"""Codebooks of the decoder's input codes: what MOSS-TTS-Realtime generates and decodes."""


def _random_config(source: str) -> MossCodecConfig:
    from app.families.moss.fixtures.codec import TINY_MOSS_CONFIG

    configs = {"official": MossCodecConfig.official(), "tiny": TINY_MOSS_CONFIG}
    size = source.removeprefix(RANDOM_PREFIX)
    if size not in configs:
        raise ValueError(f"unknown random MOSS codec {source!r}: use random:official or random:tiny")
    return configs[size]


def _config(source: str) -> MossCodecConfig:
    if source.startswith(RANDOM_PREFIX):
        return _random_config(source)
    if Path(source).is_dir():
        return read_config(Path(source))
    return _load(source).config


def _load(source: str) -> MossAudioCodec:
    """The float32 codec of ``source``, with its encoder, on the CPU."""
    if source.startswith(RANDOM_PREFIX):
        from app.families.moss.fixtures.codec import random_codec

        return random_codec(_random_config(source), seed=0)
    from app.families.moss.codec.loading import load_codec

    return load_codec(source)


def voiced_signal(samples: int, sample_rate: int, seed: int) -> torch.Tensor:
    """A deterministic speech-like waveform ``[samples]`` (float32, peak 0.5): harmonics of a pitch gliding
    around 150 Hz under three formant peaks, loudness rising and falling at about 4 syllables a second, and
    breath noise 30 dB down."""
    gen = torch.Generator().manual_seed(seed)

    def uniform(low: float, high: float, n: int = 1) -> torch.Tensor:
        return low + (high - low) * torch.rand(n, generator=gen, dtype=torch.float64)

    t = torch.arange(samples, dtype=torch.float64) / sample_rate
    f0 = 150.0 * (1.0 + 0.2 * torch.sin(2 * math.pi * uniform(0.3, 0.8) * t + uniform(0, 2 * math.pi)))
    phase = 2 * math.pi * torch.cumsum(f0, 0) / sample_rate
    formants = uniform(300, 900), uniform(900, 2500), uniform(2500, 3500)
    signal = torch.zeros_like(t)
    for k, offset in enumerate(uniform(0, 2 * math.pi, 40).tolist(), start=1):
        freq = k * f0
        gain = sum(torch.exp(-(((freq - f) / 200.0) ** 2)) for f in formants) / k
        signal += gain * torch.sin(k * phase + offset) * (freq < sample_rate / 2)
    syllables = 0.55 + 0.45 * torch.sin(2 * math.pi * uniform(3.5, 4.5) * t + uniform(0, 2 * math.pi))
    signal = signal * syllables
    noise = torch.randn(samples, generator=gen, dtype=torch.float64)
    signal = signal / signal.abs().max().clamp_min(1e-12) + 10 ** (-30 / 20) * noise / 3
    return (0.5 * signal / signal.abs().max().clamp_min(1e-12)).float()


def _stages(stack: torch.nn.ModuleList, prefix: str) -> dict[str, torch.nn.Module]:
    return {f"{prefix}.{i}": m for i, m in enumerate(stack) if isinstance(m, ProjectedTransformer)}


class MossCodecPart:
    """``moss-codec``: see the module docstring."""

    name: ClassVar[str] = "moss-codec"
    kind: ClassVar[Kind] = "codec"
    description: ClassVar[str] = (
        "MOSS-Audio-Tokenizer: audio -> encoder stages and codes; codes -> decoder stages and 24 kHz audio; "
        "random:official, random:tiny"
    )
    default_length: ClassVar[int] = 64

    def make_inputs(
        self, source: str, seed: int, length: int
    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        config = _config(source)
        audio = voiced_signal(length * config.downsample_rate, config.sampling_rate, seed)
        generator = torch.Generator().manual_seed(seed)
        nq = min(DECODE_CODEBOOKS, config.num_quantizers)
        codes = torch.randint(0, config.codebook_size, (length, nq), generator=generator)
        return {"audio": audio, "codes": codes}, {"sample_rate": config.sampling_rate, "seed": seed}

    def run(
        self, source: str, config: RunConfig, inputs: dict[str, torch.Tensor], options: dict[str, Any]
    ) -> dict[str, torch.Tensor]:
        if config.attention != "sdpa":
            raise ValueError("the MOSS codec has one attention kernel: use sdpa")
        device = resolve_device(config.device)
        set_current(device)
        codec = _load(source).to(device)
        if config.dtype != "float32":  # the transformer stages, as load_codec(dtype=...) does
            assert codec.encoder is not None  # _load keeps the encoder
            codec.encoder.to(config.torch_dtype)
            codec.decoder.to(config.torch_dtype)
        assert codec.encoder is not None
        encoder_stages = _stages(codec.encoder, "encoder")
        decoder_stages = _stages(codec.decoder, "decoder")
        with capture(encoder_stages, squeeze=False) as encoded:
            (codes,) = codec.encode([inputs["audio"].to(device)])
        with capture(decoder_stages, squeeze=False) as decoded:
            audio = codec.decode(inputs["codes"].to(device))
        outputs = {name: encoded[name] for name in encoder_stages}
        outputs["codes"] = codes.to("cpu", torch.int64)
        outputs |= {name: decoded[name] for name in decoder_stages}
        outputs["audio"] = as_output(audio)
        del codec
        release(device)
        return outputs
