"""CUDA decode equals CPU decode (TF32 off, so the comparison is of float32 math, not of TF32)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from app.codec.neucodec.decoder import NeuCodecDecoder
from app.codec.neucodec.loading import load_decoder
from app.codec.worker import CodecWorker

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


@pytest.fixture
def no_tf32() -> Iterator[None]:
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture(scope="module")
def cuda_decoder(tiny_codec_dir: Path) -> NeuCodecDecoder:
    return load_decoder(str(tiny_codec_dir), "cuda")


@pytest.mark.usefixtures("no_tf32")
def test_cuda_decode_matches_cpu(tiny_decoder: NeuCodecDecoder, cuda_decoder: NeuCodecDecoder) -> None:
    codes = torch.randint(0, 65536, (3, 41), generator=torch.Generator().manual_seed(0))
    on_gpu = cuda_decoder.decode(codes)
    assert on_gpu.device.type == "cuda"
    torch.testing.assert_close(on_gpu.cpu(), tiny_decoder.decode(codes), atol=1e-4, rtol=1e-3)


@pytest.mark.usefixtures("no_tf32")
async def test_worker_on_cuda_matches_cpu(
    tiny_decoder: NeuCodecDecoder, cuda_decoder: NeuCodecDecoder
) -> None:
    worker = CodecWorker(cuda_decoder, "cuda")
    worker.start()
    try:
        codes = list(range(0, 65536, 997))
        audio = await worker.decode(codes)
    finally:
        await worker.close()
    expected = tiny_decoder.decode(torch.tensor([codes]))[0].numpy()
    np.testing.assert_allclose(audio, expected, atol=1e-4, rtol=1e-3)
