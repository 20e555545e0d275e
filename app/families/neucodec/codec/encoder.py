"""NeuCodecEncoder: 16 kHz audio -> speech codes (50 per second), with the official checkpoint's key layout.

Path (as ``NeuCodec.encode_code``): pad the waveform; semantic features = w2v-bert hidden state 16 of
the padded waveform's log-mel features through ``SemanticEncoder_module``; acoustic features =
``CodecEnc`` of the padded waveform; trim both to the shorter length, concatenate
``[semantic, acoustic]`` on the channel axis, ``fc_prior``, FSQ quantisation.

Padding quirk, kept on purpose: the official ``_prepare_audio`` appends ``320 - S % 320`` zeros, a
full 320 when ``S`` is already a multiple of 320. A waveform of ``S`` samples is padded to
``320 (S // 320 + 1)``; the acoustic encoder then gives ``S // 320 + 1`` frames and the semantic
branch one fewer, so an item yields exactly ``S // 320`` codes (``frames_for``).

Batching is exact by construction: items are grouped by padded length, so every item of a forward
pass has exactly the input it has alone (its own zeros, its own feature normalisation) and no
padding or mask is ever needed. Only the batch dimension differs, which changes no value except
through a kernel's choice of summation order, a last-bit effect that can flip a code only if a
pre-rounding value lies within that last bit of a rounding boundary.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from app.families.neucodec.codec.acoustic import AcousticEncoder
from app.families.neucodec.codec.config import NeuCodecConfig
from app.families.neucodec.codec.encoder_config import SAMPLES_PER_CODE, NeuCodecEncoderConfig
from app.families.neucodec.codec.fsq import FSQQuantizer
from app.families.neucodec.codec.semantic import (
    SemanticEncoder,
    build_semantic_model,
    extract_features,
    make_feature_extractor,
)

MIN_SAMPLES = SAMPLES_PER_CODE  # shorter input has no code (and no complete w2v-bert frame)
PAD_CODE = -1  # fills ``encode``'s output past an item's own codes; never a real code


def padded_length(num_samples: int) -> int:
    """Samples after the official padding: the next multiple of 320 strictly above ``num_samples``."""
    return num_samples + SAMPLES_PER_CODE - num_samples % SAMPLES_PER_CODE


def frames_for(num_samples: int) -> int:
    """Number of codes for a waveform of ``num_samples`` samples at 16 kHz."""
    return num_samples // SAMPLES_PER_CODE


class _Quantizer(nn.Module):
    """The ``generator`` sub-tree of the encode path: only ``generator.quantizer.project_in``."""

    def __init__(self, codec: NeuCodecConfig) -> None:
        super().__init__()
        self.quantizer = FSQQuantizer(codec.vq_dim, codec.levels)


class NeuCodecEncoder(nn.Module):
    """Encode path of NeuCodec.

    waveform ``[B, 1, S]`` -> padded ``[B, 1, P]`` (``P = 320 k``)
    -> semantic ``[B, semantic_dim, k - 1]`` and acoustic ``[B, acoustic_dim, k]``, trimmed to ``F = k - 1``
    -> concatenated ``[B, vq_dim, F]`` -> ``fc_prior`` ``[B, F, vq_dim]`` -> FSQ codes ``[B, F]``.
    Parameters are named as in the checkpoint: ``semantic_model.*`` (transformers' names, only the
    first ``semantic_hidden_state`` layers), ``SemanticEncoder_module.*``, ``CodecEnc.*``,
    ``fc_prior.*``, ``generator.quantizer.project_in.*``.
    """

    def __init__(self, codec: NeuCodecConfig, config: NeuCodecEncoderConfig) -> None:
        super().__init__()
        if config.semantic_dim + config.acoustic_dim != codec.vq_dim:
            raise ValueError(
                f"semantic_dim + acoustic_dim ({config.semantic_dim} + {config.acoustic_dim}) "
                f"must equal the codec's vq_dim ({codec.vq_dim})"
            )
        self.codec_config = codec
        self.config = config
        self.feature_extractor = make_feature_extractor()
        self.semantic_model = build_semantic_model(config)
        self.SemanticEncoder_module = SemanticEncoder(config.semantic_width, config.semantic_dim)
        self.CodecEnc = AcousticEncoder(config)
        self.fc_prior = nn.Linear(codec.vq_dim, codec.vq_dim)
        self.generator = _Quantizer(codec)

    def forward(self, audio: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """Padded waveforms ``[B, 1, P]``, w2v-bert features ``[B, P / 320 - 1, 160]`` -> codes ``[B, F]``."""
        semantic = self.semantic_model(features).last_hidden_state  # [B, Ts, width]
        semantic = self.SemanticEncoder_module(semantic.transpose(1, 2))  # [B, width, Ts] -> [B, Ds, Ts]
        acoustic = self.CodecEnc(audio)  # [B, Da, Ta]
        frames = min(semantic.shape[-1], acoustic.shape[-1])
        joint = torch.cat([semantic[..., :frames], acoustic[..., :frames]], dim=1)  # [B, vq_dim, F]
        joint = self.fc_prior(joint.transpose(1, 2))  # [B, vq_dim, F] -> [B, F, vq_dim]
        return self.generator.quantizer(joint)

    @torch.inference_mode()
    def encode(self, audio: torch.Tensor, lengths: Sequence[int] | None = None) -> torch.Tensor:
        """Encode 16 kHz waveforms ``[B, 1, S]`` to int64 codes ``[B, F]`` on cpu.

        ``lengths[i]`` is item i's own sample count (default: all ``S``); samples past it are ignored.
        Item i's codes are ``out[i, :frames_for(lengths[i])]``; the rest of its row is ``PAD_CODE``.
        Raises ValueError for a wrong shape, an item shorter than ``MIN_SAMPLES`` or non-finite samples.
        """
        if audio.dim() != 3 or audio.shape[1] != 1:
            raise ValueError(f"audio must have shape [B, 1, S], got {tuple(audio.shape)}")
        batch, _, width = audio.shape
        sizes = [width] * batch if lengths is None else [int(n) for n in lengths]
        if len(sizes) != batch or any(not MIN_SAMPLES <= n <= width for n in sizes):
            raise ValueError(f"lengths must give {batch} items of {MIN_SAMPLES}..{width} samples: {sizes}")
        waveforms = audio[:, 0].detach().to(device="cpu", dtype=torch.float32).numpy()
        if not all(np.isfinite(waveforms[i, :n]).all() for i, n in enumerate(sizes)):
            raise ValueError("audio contains NaN or infinite samples")
        groups: defaultdict[int, list[int]] = defaultdict(list)
        for index, size in enumerate(sizes):
            groups[padded_length(size)].append(index)
        codes = torch.full((batch, max(frames_for(n) for n in sizes)), PAD_CODE, dtype=torch.long)
        for padded, members in groups.items():
            items = [np.pad(waveforms[i, : sizes[i]], (0, padded - sizes[i])) for i in members]
            group_codes = self._encode_equal(items)  # [G, F_group]
            codes[members, : group_codes.shape[1]] = group_codes
        return codes

    def _encode_equal(self, waveforms: list[np.ndarray]) -> torch.Tensor:
        """Equal-length padded waveforms ``[P]`` each -> codes ``[G, P / 320 - 1]`` on cpu."""
        weight = self.fc_prior.weight
        features = extract_features(self.feature_extractor, waveforms)  # [G, P / 320 - 1, 160]
        audio = torch.from_numpy(np.stack(waveforms)).unsqueeze(1)  # [G, P] -> [G, 1, P]
        codes = self(
            audio.to(device=weight.device, dtype=weight.dtype),
            features.to(device=weight.device, dtype=weight.dtype),
        )
        return codes.cpu()
