"""CodecWorker: one device thread, futures settled on the loop, isolation, cancellation, shutdown."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator

import numpy as np
import pytest
import torch

from app.codec.batcher import BatcherClosed
from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.codec.worker import WARMUP_RUNS, CodecOptions, CodecWorker

HOP = 480


class GatedDecoder:
    """The real decoder behind a gate: records each call's length; waits for ``release`` first."""

    def __init__(self, decoder: NeuCodecDecoder) -> None:
        self.decoder = decoder
        self.config = decoder.config
        self.calls: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, codes: torch.Tensor) -> torch.Tensor:
        self.calls.append(codes.shape[1])
        self.entered.set()
        assert self.release.wait(timeout=30)
        return self.decoder.decode(codes)

    def forward_packed(self, codes: torch.Tensor, lengths: list[int]) -> list[torch.Tensor]:
        self.calls.extend(lengths)
        self.entered.set()
        assert self.release.wait(timeout=30)
        return self.decoder.forward_packed(codes, lengths)


def _worker_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name.startswith("decode-")}


@pytest.fixture
def threads_before() -> set[threading.Thread]:
    """Codec threads alive before the test (left by other tests, if any): not this test's business."""
    return _worker_threads()


def _expected(decoder: NeuCodecDecoder, codes: list[int]) -> np.ndarray:
    return decoder.decode(torch.tensor([codes]))[0].numpy()


@pytest.fixture
async def worker(tiny_decoder: NeuCodecDecoder) -> AsyncIterator[CodecWorker]:
    codec = CodecWorker(tiny_decoder, "cpu")
    codec.start()
    yield codec
    await codec.close()


async def _make_gated(tiny_decoder: NeuCodecDecoder) -> tuple[CodecWorker, GatedDecoder]:
    gate = GatedDecoder(tiny_decoder)
    codec = CodecWorker(gate, "cpu")
    codec.start()
    return codec, gate


async def test_concurrent_decodes_from_many_tasks(worker: CodecWorker, tiny_decoder: NeuCodecDecoder) -> None:
    rng = np.random.default_rng(0)
    requests = [rng.integers(0, 65536, size=n).tolist() for n in (2, 5, 12, 3, 30, 8)]
    results = await asyncio.gather(*(worker.decode(codes) for codes in requests))
    for codes, audio in zip(requests, results, strict=True):
        assert audio.dtype == np.float32
        assert audio.shape == (len(codes) * HOP,)
        # windows of different lengths may share a packed call: their lone decode up to the tiny
        # decoder's rounding (test_neucodec_model.py: test_packed_windows_decode_as_each_alone)
        np.testing.assert_allclose(audio, _expected(tiny_decoder, codes), atol=5e-5, rtol=0)


async def test_a_bad_item_fails_only_its_own_future(
    worker: CodecWorker, tiny_decoder: NeuCodecDecoder
) -> None:
    bad, good = worker.decode([1, 2, 65536]), worker.decode([1, 2, 3])
    results = await asyncio.gather(bad, good, return_exceptions=True)
    assert isinstance(results[0], ValueError)
    assert "65536" in str(results[0])
    np.testing.assert_array_equal(results[1], _expected(tiny_decoder, [1, 2, 3]))
    assert (await worker.decode([9] * 4)).shape == (4 * HOP,)  # the thread is still serving


async def test_empty_codes_never_reach_the_device(tiny_decoder: NeuCodecDecoder) -> None:
    codec, gate = await _make_gated(tiny_decoder)
    try:
        audio = await codec.decode([])
        assert audio.shape == (0,)
        assert audio.dtype == np.float32
        assert gate.calls == []
    finally:
        gate.release.set()
        await codec.close()


async def test_cancelled_items_are_skipped(tiny_decoder: NeuCodecDecoder) -> None:
    codec, gate = await _make_gated(tiny_decoder)
    try:
        first = asyncio.create_task(codec.decode([1] * 3))
        await asyncio.to_thread(gate.entered.wait, 10)  # the thread is busy with `first`
        doomed = asyncio.create_task(codec.decode([2] * 4))
        await asyncio.sleep(0)  # `doomed` is queued
        doomed.cancel()
        last = asyncio.create_task(codec.decode([3] * 2))
        await asyncio.sleep(0)
        gate.release.set()
        assert (await first).shape == (3 * HOP,)
        assert (await last).shape == (2 * HOP,)
        with pytest.raises(asyncio.CancelledError):
            await doomed
        assert gate.calls == [3, 2]  # the cancelled item was never computed
    finally:
        gate.release.set()
        await codec.close()


async def test_close_fails_queued_items_finishes_current_and_joins(
    tiny_decoder: NeuCodecDecoder, threads_before: set[threading.Thread]
) -> None:
    codec, gate = await _make_gated(tiny_decoder)
    running = asyncio.create_task(codec.decode([1] * 3))
    await asyncio.to_thread(gate.entered.wait, 10)
    queued = asyncio.create_task(codec.decode([2] * 4))
    await asyncio.sleep(0)
    closing = asyncio.create_task(codec.close())
    await asyncio.sleep(0.05)
    assert not closing.done()  # waiting for the running item, without blocking the loop
    with pytest.raises(BatcherClosed, match="stopped before this decode ran"):
        await queued
    gate.release.set()
    await closing
    assert (await running).shape == (3 * HOP,)
    assert gate.calls == [3]
    assert not codec.running
    assert _worker_threads() <= threads_before
    with pytest.raises(BatcherClosed):
        await codec.decode([1])
    await codec.close()  # idempotent


async def test_every_close_caller_waits_for_the_thread(
    tiny_decoder: NeuCodecDecoder, threads_before: set[threading.Thread]
) -> None:
    codec, gate = await _make_gated(tiny_decoder)
    running = asyncio.create_task(codec.decode([1] * 2))
    await asyncio.to_thread(gate.entered.wait, 10)
    closers = [asyncio.create_task(codec.close()) for _ in range(2)]
    await asyncio.sleep(0.05)
    assert not any(task.done() for task in closers)
    gate.release.set()
    await asyncio.gather(*closers, running)
    assert _worker_threads() <= threads_before


async def test_codes_are_copied_when_queued(tiny_decoder: NeuCodecDecoder) -> None:
    codec, gate = await _make_gated(tiny_decoder)
    try:
        first = asyncio.create_task(codec.decode([1] * 2))
        await asyncio.to_thread(gate.entered.wait, 10)
        buffer = [7, 8, 9]
        second = asyncio.create_task(codec.decode(buffer))
        await asyncio.sleep(0)  # queued
        buffer[:] = [0, 0, 0]  # the caller reuses its buffer
        gate.release.set()
        await first
        np.testing.assert_array_equal(await second, _expected(tiny_decoder, [7, 8, 9]))
    finally:
        gate.release.set()
        await codec.close()


async def test_decode_before_start_and_double_start(
    tiny_decoder: NeuCodecDecoder, threads_before: set[threading.Thread]
) -> None:
    codec = CodecWorker(tiny_decoder, "cpu")
    with pytest.raises(BatcherClosed, match="not running"):
        await codec.decode([1])
    codec.start()
    try:
        with pytest.raises(RuntimeError, match="twice or after close"):
            codec.start()
    finally:
        await codec.close()
    assert _worker_threads() <= threads_before


async def test_close_without_start_is_a_no_op(tiny_decoder: NeuCodecDecoder) -> None:
    await CodecWorker(tiny_decoder, "cpu").close()


async def test_warm_up_decodes_are_timed_before_any_request(tiny_decoder: NeuCodecDecoder) -> None:
    """The startup decodes report like every batch: the decode cost is measured before the first stream."""
    batches: list[tuple[float, float]] = []
    codec = CodecWorker(
        tiny_decoder,
        "cpu",
        options=CodecOptions(warmup_lengths=(20, 64)),
        decoded=lambda audio_s, compute_s: batches.append((audio_s, compute_s)),
    )
    codec.start()
    try:
        codes = [1, 2, 3]
        np.testing.assert_allclose(await codec.decode(codes), _expected(tiny_decoder, codes), atol=1e-6)
    finally:
        await codec.close()
    assert [audio_s for audio_s, _ in batches] == pytest.approx([20 * HOP / 24000, 64 * HOP / 24000, 0.06])
    assert all(compute_s > 0 for _, compute_s in batches)


class SlowAtFirst:
    """The real decoder; every call of a window length but the last of the warm-up's takes ``delay`` longer
    (its set-up, and other loading on a machine that is starting)."""

    def __init__(self, decoder: NeuCodecDecoder, delay: float) -> None:
        self.decoder = decoder
        self.config = decoder.config
        self.delay = delay
        self.calls: Counter[int] = Counter()

    def __call__(self, codes: torch.Tensor) -> torch.Tensor:
        self.calls[codes.shape[1]] += 1
        if self.calls[codes.shape[1]] <= WARMUP_RUNS:
            time.sleep(self.delay)
        return self.decoder.decode(codes)

    def forward_packed(self, codes: torch.Tensor, lengths: list[int]) -> list[torch.Tensor]:
        return self.decoder.forward_packed(codes, lengths)


async def test_warm_up_reports_the_fastest_of_its_timed_decodes(tiny_decoder: NeuCodecDecoder) -> None:
    """A decode slowed by startup (a length's first call, other loading beside it) is not what the decode
    cost starts from: each warm-up length is decoded untimed once, then timed WARMUP_RUNS times, and the
    fastest goes to the cost."""
    delay = 0.3
    slow = SlowAtFirst(tiny_decoder, delay)
    batches: list[tuple[float, float]] = []
    codec = CodecWorker(
        slow,  # type: ignore[arg-type]
        "cpu",
        options=CodecOptions(warmup_lengths=(20, 64)),
        decoded=lambda audio_s, compute_s: batches.append((audio_s, compute_s)),
    )
    codec.start()
    try:
        await codec.decode([1, 2, 3])
    finally:
        await codec.close()
    assert slow.calls[20] == slow.calls[64] == 1 + WARMUP_RUNS
    warm = batches[:2]
    assert [audio_s for audio_s, _ in warm] == pytest.approx([20 * HOP / 24000, 64 * HOP / 24000])
    assert all(0 < compute_s < delay for _, compute_s in warm), warm


class FailsLong:
    """The real decoder, failing any window of 64 codes."""

    def __init__(self, decoder: NeuCodecDecoder) -> None:
        self.decoder = decoder
        self.config = decoder.config

    def __call__(self, codes: torch.Tensor) -> torch.Tensor:
        if codes.shape[1] == 64:
            raise RuntimeError("no")
        return self.decoder.decode(codes)

    def forward_packed(self, codes: torch.Tensor, lengths: list[int]) -> list[torch.Tensor]:
        if 64 in lengths:
            raise RuntimeError("no")
        return self.decoder.forward_packed(codes, lengths)


async def test_a_failed_warm_up_leaves_the_codec_serving(tiny_decoder: NeuCodecDecoder) -> None:
    codec = CodecWorker(FailsLong(tiny_decoder), "cpu", options=CodecOptions(warmup_lengths=(20, 64)))  # type: ignore[arg-type]
    codec.start()
    try:
        assert (await codec.decode([5] * 4)).shape == (4 * HOP,)
    finally:
        await codec.close()
