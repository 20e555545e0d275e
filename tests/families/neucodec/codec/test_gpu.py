"""CUDA decode equals CPU decode (TF32 off, so the comparison is of float32 math, not of TF32); CUDA
graph batches equal lone eager decodes; a failed capture is remembered."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from app.codec.graphs import GraphPool
from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.codec.loading import load_decoder
from app.families.neucodec.codec.worker import CodecOptions, CodecWorker

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


@pytest.mark.usefixtures("no_tf32")
async def test_graph_batches_equal_eager_single_decodes(cuda_decoder: NeuCodecDecoder) -> None:
    """Batches of 3 pad to a graph of 4 (with copies of a real row); every row equals its lone decode."""
    options = CodecOptions(cuda_graphs=True, graph_batch_sizes=(1, 4), graph_lengths=(16, 24), window_s=0.05)
    worker = CodecWorker(cuda_decoder, "cuda", options=options)
    worker.start()
    gen = torch.Generator().manual_seed(1)
    windows = [torch.randint(0, 65536, (n,), generator=gen).tolist() for n in (16, 16, 16, 24, 24, 7)]
    try:
        results = await asyncio.gather(*(worker.decode(w) for w in windows))
    finally:
        await worker.close()
    graphs = worker.runner.graphs
    assert graphs is not None and (4, 16) in graphs.captured and (1, 24) in graphs.captured
    assert worker.decoder_batcher.stats.graph_hits >= 2
    for window, audio in zip(windows, results, strict=True):
        with torch.inference_mode():
            alone = cuda_decoder(torch.tensor([window], device="cuda"))[0].cpu().numpy()
        np.testing.assert_allclose(audio, alone, atol=1e-5, rtol=0)


def test_a_failed_capture_is_remembered_and_runs_eagerly(cuda_decoder: NeuCodecDecoder) -> None:
    calls = []

    def forward(codes: torch.Tensor) -> torch.Tensor:
        calls.append(torch.cuda.is_current_stream_capturing())
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("operation not permitted when stream is capturing")
        return cuda_decoder(codes)

    pool = GraphPool(forward, torch.device("cuda"), (1, 2), max_graphs=8)
    with torch.inference_mode():
        for _ in range(4):  # the first sighting runs eagerly, the second tries a capture, then eager
            assert pool.get(2, 16) is None
    assert pool.failed == [(2, 16)] and pool.captured == []
    assert calls.count(True) == 1  # never retried
