"""Codec engine settings: bucket lists parsed from CSV or JSON, the Engine's codec options, the bf16
cast (weights only) and the CPU probe behind the bf16 warning."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.family import codec_options
from app.families.neucodec.fixtures.codec import random_decoder
from tests.conftest import make_settings


@pytest.mark.parametrize("raw", ["256, 64,128", "[128, 64, 256]", "64,64,128,256"])
def test_bucket_lists_from_csv_or_json(raw: str) -> None:
    assert make_settings(CODEC_BUCKETS=raw).CODEC_BUCKETS == [64, 128, 256]


def test_empty_buckets_mean_natural_windows() -> None:
    settings = make_settings(CODEC_BUCKETS="")
    assert settings.CODEC_BUCKETS == []
    assert settings.CUDA_GRAPH_BUCKETS == [1, 2, 4, 8, 16]


@pytest.mark.parametrize("raw", ["0,64", "-4", "abc", "[1.5]", "__import__('os')"])
def test_bad_bucket_lists_are_rejected(raw: str) -> None:
    with pytest.raises(ValidationError):
        make_settings(CUDA_GRAPH_BUCKETS=raw)


def test_codec_options_follow_the_settings() -> None:
    settings = make_settings(
        BATCH_WINDOW_MS=5,
        MAX_BATCH_SIZE=4,
        CODEC_BUCKETS="64,128",
        CUDA_GRAPH_BUCKETS="1,2",
        TORCH_COMPILE=True,
    )
    options = codec_options(settings)
    assert (options.window_s, options.max_batch, options.compile) == (0.005, 4, True)
    assert options.graph_batch_sizes == (1, 2) and options.graph_lengths == (64, 128)
    assert codec_options(make_settings(CUDA_GRAPH_WARMUP=False)).graph_lengths == ()


def test_cast_converts_weights_but_keeps_buffers_and_output_float32() -> None:
    decoder: NeuCodecDecoder = random_decoder().cast(torch.bfloat16)
    assert {p.dtype for p in decoder.parameters()} == {torch.bfloat16}
    assert {b.dtype for b in decoder.buffers() if b.is_floating_point()} == {torch.float32}
    with torch.inference_mode():
        assert decoder(torch.tensor([[1, 2, 3, 4]])).dtype == torch.float32
