"""CodecWorker encode path: its own thread, exact batching of queued encodes, errors, shutdown."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import torch

from app.codec.batcher import BatcherClosed
from app.core.errors import Unavailable
from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.codec.encoder import NeuCodecEncoder
from app.families.neucodec.codec.loading import load_encoder
from app.families.neucodec.codec.worker import CodecOptions, CodecWorker, EncoderUnavailable

HOP = 480


@pytest.fixture(scope="module")
def tiny_encoder(tiny_codec_dir: Path) -> NeuCodecEncoder:
    return load_encoder(str(tiny_codec_dir))


def noise(n: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(n) * 0.1).astype(np.float32)


def alone(encoder: NeuCodecEncoder, audio: np.ndarray) -> list[int]:
    return encoder.encode(torch.from_numpy(audio).view(1, 1, -1))[0].tolist()


class GatedEncoder:
    """The real encoder behind a gate: records each call's batch size; waits for ``release`` first."""

    def __init__(self, encoder: NeuCodecEncoder) -> None:
        self.encoder = encoder
        self.calls: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def encode(self, audio: torch.Tensor, lengths: Sequence[int] | None = None) -> torch.Tensor:
        self.calls.append(audio.shape[0])
        self.entered.set()
        assert self.release.wait(timeout=30)
        return self.encoder.encode(audio, lengths)


@pytest.fixture
async def worker(tiny_decoder: NeuCodecDecoder, tiny_encoder: NeuCodecEncoder) -> AsyncIterator[CodecWorker]:
    codec = CodecWorker(tiny_decoder, "cpu", encoder=tiny_encoder)
    codec.start()
    yield codec
    await codec.close()


async def test_concurrent_encodes_from_many_tasks(worker: CodecWorker, tiny_encoder: NeuCodecEncoder) -> None:
    clips = [noise(n, seed) for seed, n in enumerate((3200, 1000, 3300, 700, 3200))]
    results = await asyncio.gather(*(worker.encode(clip) for clip in clips))
    for clip, codes in zip(clips, results, strict=True):
        assert codes == alone(tiny_encoder, clip)
        assert len(codes) == len(clip) // 320
        assert all(isinstance(code, int) and 0 <= code < 65536 for code in codes)


async def test_encodes_and_decodes_interleave(
    worker: CodecWorker, tiny_encoder: NeuCodecEncoder, tiny_decoder: NeuCodecDecoder
) -> None:
    clips = [noise(1600 + 320 * i, i) for i in range(3)]
    code_lists = [[5, 6, 7], [65535] * 4, [0, 1]]
    jobs = [job for pair in zip(clips, code_lists, strict=True) for job in pair]
    results = await asyncio.gather(
        *(worker.encode(job) if isinstance(job, np.ndarray) else worker.decode(job) for job in jobs)
    )
    for job, result in zip(jobs, results, strict=True):
        if isinstance(job, np.ndarray):
            assert result == alone(tiny_encoder, job)
        else:  # windows of different lengths may share a packed decode: their lone audio up to rounding
            expected = tiny_decoder.decode(torch.tensor([job]))[0].numpy()
            np.testing.assert_allclose(result, expected, atol=5e-5, rtol=0)


async def test_queued_encodes_run_in_batches_in_arrival_order(
    tiny_decoder: NeuCodecDecoder, tiny_encoder: NeuCodecEncoder
) -> None:
    gate = GatedEncoder(tiny_encoder)
    codec = CodecWorker(tiny_decoder, "cpu", encoder=gate, options=CodecOptions(max_encode_batch=2))
    codec.start()
    try:
        clips = [noise(1000 + 100 * i, i) for i in range(6)]
        first = asyncio.create_task(codec.encode(clips[0]))
        await asyncio.to_thread(gate.entered.wait, 10)  # the encode thread is busy with `first`
        queued = [asyncio.create_task(codec.encode(clip)) for clip in clips[1:4]]
        doomed = asyncio.create_task(codec.encode(clips[4]))
        last = asyncio.create_task(codec.encode(clips[5]))
        await asyncio.sleep(0)  # all queued
        doomed.cancel()
        gate.release.set()
        results = await asyncio.gather(first, *queued, last)
        assert results == [alone(tiny_encoder, clip) for clip in (*clips[:4], clips[5])]
        with pytest.raises(asyncio.CancelledError):
            await doomed
        # [first], then the queued ones two at a time, the cancelled one dropped before batching
        assert gate.calls == [1, 2, 2]
    finally:
        gate.release.set()
        await codec.close()


async def test_a_long_encode_does_not_hold_up_decodes(
    tiny_decoder: NeuCodecDecoder, tiny_encoder: NeuCodecEncoder
) -> None:
    gate = GatedEncoder(tiny_encoder)
    codec = CodecWorker(tiny_decoder, "cpu", encoder=gate)
    codec.start()
    try:
        encoding = asyncio.create_task(codec.encode(noise(1000, 0)))
        await asyncio.to_thread(gate.entered.wait, 10)  # the encoder is stuck until released
        decoded = await asyncio.wait_for(codec.decode([1, 2, 3]), timeout=10)
        np.testing.assert_array_equal(decoded, tiny_decoder.decode(torch.tensor([[1, 2, 3]]))[0].numpy())
        assert not encoding.done()
        gate.release.set()
        assert len(await encoding) == 3
    finally:
        gate.release.set()
        await codec.close()


async def test_a_bad_item_fails_only_itself(worker: CodecWorker, tiny_encoder: NeuCodecEncoder) -> None:
    bad = noise(2000, 0)
    bad[100] = np.inf
    good = noise(2000, 1)
    results = await asyncio.gather(worker.encode(bad), worker.encode(good), return_exceptions=True)
    assert isinstance(results[0], ValueError) and "NaN or infinite" in str(results[0])
    assert results[1] == alone(tiny_encoder, good)
    with pytest.raises(ValueError, match="at least 320 samples"):
        await worker.encode(np.zeros(319, dtype=np.float32))
    with pytest.raises(ValueError, match="1-D"):
        await worker.encode(np.zeros((2, 1000), dtype=np.float32))


async def test_without_encoder_encode_is_unavailable_and_decode_works(tiny_decoder: NeuCodecDecoder) -> None:
    codec = CodecWorker(tiny_decoder, "cpu")
    codec.start()
    try:
        assert not codec.can_encode
        with pytest.raises(EncoderUnavailable) as error:
            await codec.encode(noise(1000, 0))
        assert isinstance(error.value, Unavailable) and error.value.status == 503
        assert (await codec.decode([3, 4, 5])).shape == (3 * HOP,)
    finally:
        await codec.close()


async def test_close_fails_queued_encodes(
    tiny_decoder: NeuCodecDecoder, tiny_encoder: NeuCodecEncoder
) -> None:
    gate = GatedEncoder(tiny_encoder)
    codec = CodecWorker(tiny_decoder, "cpu", encoder=gate)
    codec.start()
    running = asyncio.create_task(codec.encode(noise(1000, 0)))
    await asyncio.to_thread(gate.entered.wait, 10)
    queued = asyncio.create_task(codec.encode(noise(1000, 1)))
    await asyncio.sleep(0)
    closing = asyncio.create_task(codec.close())
    with pytest.raises(BatcherClosed, match="stopped before this encode ran"):
        await queued
    gate.release.set()
    await closing
    assert len(await running) == 3
    with pytest.raises(BatcherClosed):
        await codec.encode(noise(1000, 2))
