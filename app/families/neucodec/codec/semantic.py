"""The semantic branch: w2v-bert-2.0 features (hidden state 16) through ``SemanticEncoder_module``.

Input features come from transformers' ``SeamlessM4TFeatureExtractor`` built from the parameters of
``facebook/w2v-bert-2.0``'s ``preprocessor_config.json`` (no download): 80 Kaldi-style log-mel bins,
25 ms windows every 10 ms, normalised per mel bin over the item, stacked by 2 into 160-wide frames
every 20 ms. transformers' defaults are the same except ``padding_value`` (0.0 there, 1 in the
official file); it only fills frames added when padding, and we never pad: each item is featurised
alone, and a waveform of ``320 k`` samples gives ``2 k - 2`` mel frames, an even count, hence
``k - 1`` stacked frames.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from app.families.neucodec.codec.encoder_config import SAMPLE_RATE, NeuCodecEncoderConfig

if TYPE_CHECKING:
    from transformers import SeamlessM4TFeatureExtractor, Wav2Vec2BertModel

# facebook/w2v-bert-2.0 preprocessor_config.json
FEATURE_EXTRACTOR_PARAMS = {
    "feature_size": 80,
    "sampling_rate": SAMPLE_RATE,
    "num_mel_bins": 80,
    "padding_value": 1.0,
    "stride": 2,
    "padding_side": "right",
    "return_attention_mask": True,
}


def make_feature_extractor() -> SeamlessM4TFeatureExtractor:
    """The w2v-bert-2.0 feature extractor, constructed from its published parameters."""
    from transformers import SeamlessM4TFeatureExtractor

    return SeamlessM4TFeatureExtractor(**FEATURE_EXTRACTOR_PARAMS)


def extract_features(extractor: SeamlessM4TFeatureExtractor, waveforms: list[np.ndarray]) -> torch.Tensor:
    """Features of equal-length waveforms ``[S]`` each -> ``[B, frames, 160]`` float32, one item at a time.

    Each item is normalised over its own frames, as when it is featurised alone.
    """
    features = [
        extractor(waveform, sampling_rate=SAMPLE_RATE, return_tensors="np")["input_features"][0]
        for waveform in waveforms
    ]
    return torch.from_numpy(np.stack(features))


def build_semantic_model(config: NeuCodecEncoderConfig) -> Wav2Vec2BertModel:
    """w2v-bert with only the layers NeuCodec reads (its last hidden state is ``hidden_states[16]``)."""
    from transformers import Wav2Vec2BertModel

    return Wav2Vec2BertModel(config.semantic_config())


class SemanticEncoder(nn.Module):
    """``SemanticEncoder_module``: ``[B, semantic_width, T]`` -> ``[B, semantic_dim, T]``, 3-tap convs.

    The published module applies an in-place ReLU to the first conv's output inside its residual
    branch, so the skip connection carries ``relu(h)``, not ``h``: ``y = final(block(r) + r)`` with
    ``r = relu(initial(x))``. The checkpoint was trained that way, and so we compute it.
    """

    def __init__(self, in_channels: int, channels: int) -> None:
        super().__init__()
        self.initial_conv = nn.Conv1d(in_channels, channels, 3, padding=1, bias=False)
        self.residual_blocks = nn.Sequential(
            nn.ReLU(),
            nn.Conv1d(channels, channels, 3, padding=1),
            nn.ReLU(),
            nn.Conv1d(channels, channels, 3, padding=1),
        )
        self.final_conv = nn.Conv1d(channels, channels, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = torch.relu(self.initial_conv(x))
        return self.final_conv(self.residual_blocks(residual) + residual)
