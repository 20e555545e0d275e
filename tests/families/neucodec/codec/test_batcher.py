"""Batcher: collection window and size, grouping, failures, timeouts, cancellation, hooks; and the
exactness of batched decodes through CodecWorker (each item equals its own unbatched decode)."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import random
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping

import numpy as np
import pytest
import torch

from app.codec.batcher import Batcher, BatcherClosed, BatchTimeout
from app.core.errors import Unavailable
from app.families.neucodec.codec.config import NeuCodecConfig
from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.codec.worker import CodecOptions, CodecWorker
from app.families.neucodec.fixtures.codec import random_decoder


class Recorder:
    """prepare/run for a Batcher of ints: run returns each item * 10 and records the batches."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.fail_when: Callable[[list[int]], bool] = lambda items: False

    def prepare(self, items: list[int]) -> list[int]:
        return list(items)

    def run(self, items: list[int]) -> tuple[list[int | BaseException], bool]:
        assert self.gate.wait(timeout=30)
        self.batches.append(items)
        if self.fail_when(items):
            raise RuntimeError(f"batch {items} failed")
        return [item * 10 for item in items], False


def make(recorder: Recorder, **kwargs: object) -> Batcher[int, int, list[int]]:
    options: dict = {"window_s": 0.002, "max_batch": 16, "timeout_s": 30.0, "key": lambda item: item % 2}
    options.update(kwargs)
    return Batcher("decode", prepare=recorder.prepare, run=recorder.run, **options)


@pytest.fixture
async def recorder() -> AsyncIterator[Recorder]:
    rec = Recorder()
    yield rec
    rec.gate.set()


async def test_results_come_back_in_order_of_items(recorder: Recorder) -> None:
    batcher = make(recorder, key=lambda item: 0)
    batcher.start()
    try:
        assert await asyncio.gather(*(batcher.submit(i) for i in range(5))) == [0, 10, 20, 30, 40]
    finally:
        await batcher.close()


async def test_sixteen_together_make_one_full_batch(recorder: Recorder) -> None:
    batcher = make(recorder, window_s=5.0, key=lambda item: 0)
    batcher.start()
    try:
        started = time.monotonic()
        await asyncio.gather(*(batcher.submit(i) for i in range(16)))
        assert time.monotonic() - started < 2.0  # the batch was full: nobody waited out the window
        assert [len(batch) for batch in recorder.batches] == [16]
        assert batcher.stats.sizes == {16: 1}
    finally:
        await batcher.close()


async def test_a_lone_request_waits_no_longer_than_the_window(recorder: Recorder) -> None:
    window = 0.05
    batcher = make(recorder, window_s=window)
    batcher.start()
    try:
        await batcher.submit(1)  # warm
        started = time.monotonic()
        assert await batcher.submit(3) == 30
        assert time.monotonic() - started < window + 0.5
        assert batcher.stats.waits_s.last <= window + 0.5
    finally:
        await batcher.close()


async def test_items_are_grouped_by_key_never_mixed(recorder: Recorder) -> None:
    batcher = make(recorder, window_s=0.2)
    batcher.start()
    try:
        results = await asyncio.gather(*(batcher.submit(i) for i in range(10)))
        assert results == [i * 10 for i in range(10)]
        for batch in recorder.batches:
            assert len({item % 2 for item in batch}) == 1
        assert sorted(len(batch) for batch in recorder.batches) == [5, 5]
    finally:
        await batcher.close()


async def test_groups_are_split_at_max_batch(recorder: Recorder) -> None:
    batcher = make(recorder, window_s=0.2, max_batch=4, key=lambda item: 0)
    recorder.gate.clear()
    batcher.start()
    try:
        first = asyncio.create_task(batcher.submit(0))
        await asyncio.sleep(0.3)  # `first` is in the worker, behind the gate
        rest = [asyncio.create_task(batcher.submit(i)) for i in range(1, 11)]
        await asyncio.sleep(0.3)
        recorder.gate.set()
        await asyncio.gather(first, *rest)
        assert all(len(batch) <= 4 for batch in recorder.batches)
        assert sorted(item for batch in recorder.batches for item in batch) == list(range(11))
    finally:
        await batcher.close()


async def test_idle_batcher_uses_no_cpu(recorder: Recorder) -> None:
    batcher = make(recorder)
    batcher.start()

    def cpu_s() -> float:  # CPU time of the batcher's own two threads
        return sum(time.clock_gettime(time.pthread_getcpuclockid(t.ident)) for t in batcher._threads)

    try:
        await batcher.submit(1)
        before = cpu_s()
        await asyncio.sleep(0.5)
        assert cpu_s() - before < 0.01  # blocked on queues, nothing polls
    finally:
        await batcher.close()


async def test_a_failing_batch_fails_only_its_items_and_the_worker_goes_on(recorder: Recorder) -> None:
    recorder.fail_when = lambda items: 13 in items
    batcher = make(recorder, window_s=0.1)
    batcher.start()
    try:
        good, bad, odd = await asyncio.gather(
            batcher.submit(2), batcher.submit(13), batcher.submit(4), return_exceptions=True
        )
        assert (good, odd) == (20, 40)
        assert isinstance(bad, RuntimeError)
        assert await batcher.submit(13 * 2) == 260  # later batches run
    finally:
        await batcher.close()


async def test_a_failing_prepare_fails_only_its_batch(recorder: Recorder) -> None:
    def prepare(items: list[int]) -> list[int]:
        if 7 in items:
            raise ValueError("cannot stage")
        return items

    batcher = Batcher(
        "decode", prepare=prepare, run=recorder.run, key=lambda i: i, window_s=0.05, max_batch=8, timeout_s=9
    )
    batcher.start()
    try:
        ok, bad = await asyncio.gather(batcher.submit(1), batcher.submit(7), return_exceptions=True)
        assert ok == 10 and isinstance(bad, ValueError)
    finally:
        await batcher.close()


async def test_a_wait_past_the_timeout_is_a_503_and_the_item_is_dropped(recorder: Recorder) -> None:
    batcher = make(recorder, timeout_s=0.2, key=lambda item: item)
    recorder.gate.clear()
    batcher.start()
    try:
        busy = asyncio.create_task(batcher.submit(1))
        await asyncio.sleep(0.05)
        with pytest.raises(BatchTimeout) as caught:
            await batcher.submit(2)  # stuck behind the gated batch
        assert isinstance(caught.value, Unavailable) and caught.value.status == 503
        recorder.gate.set()
        with pytest.raises(BatchTimeout):
            await busy  # it timed out too, while computing
        assert await batcher.submit(3) == 30
        assert [2] not in recorder.batches  # the timed-out queued item never reached the device
    finally:
        await batcher.close()


async def test_close_fails_queued_items_and_refuses_new_ones(recorder: Recorder) -> None:
    batcher = make(recorder, key=lambda item: item)
    recorder.gate.clear()
    batcher.start()
    running = asyncio.create_task(batcher.submit(1))
    await asyncio.sleep(0.05)
    queued = [asyncio.create_task(batcher.submit(i)) for i in (2, 3)]
    await asyncio.sleep(0.05)
    closing = asyncio.create_task(batcher.close())
    await asyncio.sleep(0.05)
    recorder.gate.set()
    await closing
    assert await running == 10
    for task in queued:
        with pytest.raises(BatcherClosed):
            await task
    with pytest.raises(BatcherClosed):
        await batcher.submit(5)
    assert not any(t.name.startswith("decode-") for t in threading.enumerate() if t.is_alive())


class Hooks:
    """A span recorder (the context is a contextvar) and a metrics observer that record calls."""

    def __init__(self) -> None:
        self.context: contextvars.ContextVar[str | None] = contextvars.ContextVar("span", default=None)
        self.spans: list[tuple[str, object, int, int, dict]] = []
        self.batches: list[tuple[str, int, bool]] = []
        self.waits: list[float] = []
        self.depths: list[int] = []

    def current_context(self) -> object | None:
        return self.context.get()

    def record_span(
        self, name: str, parent: object | None, start_ns: int, end_ns: int, attributes: Mapping | None = None
    ) -> None:
        self.spans.append((name, parent, start_ns, end_ns, dict(attributes or {})))

    def observe_codec_batch(self, queue: str, size: int, compute_s: float, graph: bool) -> None:
        assert compute_s >= 0
        self.batches.append((queue, size, graph))

    def observe_codec_queue_wait(self, queue: str, wait_s: float) -> None:
        self.waits.append(wait_s)

    def set_codec_queue_depth(self, queue: str, depth: int) -> None:
        self.depths.append(depth)


async def test_hooks_get_spans_with_the_submitters_parent_and_batch_metrics(recorder: Recorder) -> None:
    hooks = Hooks()
    batcher = make(recorder, window_s=0.2, key=lambda item: 0, observer=hooks, spans=hooks)
    batcher.start()

    async def traced(item: int, span: str) -> int:
        hooks.context.set(span)
        return await batcher.submit(item)

    try:
        await asyncio.gather(traced(1, "request-a"), traced(2, "request-b"), batcher.submit(3))
    finally:
        await batcher.close()
    assert hooks.batches == [("decode", 3, False)]
    assert len(hooks.waits) == 3 and hooks.depths
    names = ["codec.batch_wait", "codec.batch_prep", "codec.compute_wait", "codec.gpu_decode"]
    for parent in ("request-a", "request-b"):
        spans = [span for span in hooks.spans if span[1] == parent]
        assert [span[0] for span in spans] == names
        for (_, _, start, end, _), (_, _, next_start, _, _) in itertools.pairwise(spans):
            assert start <= end <= next_start  # consecutive stages
        assert spans[-1][4] == {"batch.size": 3, "codec.cuda_graph": False}
    assert len(hooks.spans) == 8  # the untraced item records none


# --- exactness through the real decoder --------------------------------------------------------------


def _alone(decoder: NeuCodecDecoder, codes: list[int]) -> np.ndarray:
    with torch.inference_mode():
        return decoder(torch.tensor([codes]))[0].float().numpy()


async def test_batched_decodes_equal_unbatched_decodes(tiny_decoder: NeuCodecDecoder) -> None:
    rng = random.Random(7)
    lengths = [rng.choice([5, 8, 8, 13, 13, 13, 21]) for _ in range(40)]
    windows = [[rng.randrange(65536) for _ in range(n)] for n in lengths]
    options = CodecOptions(window_s=0.05, max_batch=16, batching="on")  # batching is off on a CPU by default
    worker = CodecWorker(tiny_decoder, "cpu", options=options)
    worker.start()
    try:
        results = await asyncio.gather(*(worker.decode(w) for w in windows))
    finally:
        await worker.close()
    assert max(worker.decoder_batcher.stats.sizes) > 1  # items really shared batches
    for window, audio in zip(windows, results, strict=True):
        expected = _alone(tiny_decoder, window)
        assert audio.shape == expected.shape
        assert np.abs(audio - expected).max() <= 1e-5


async def test_a_cpu_packs_windows_of_different_lengths_and_each_decodes_as_alone(
    tiny_decoder: NeuCodecDecoder,
) -> None:
    """The CPU default (``auto``): windows of any lengths waiting together share one packed call, within
    the code budget, and each gets its lone decode."""
    rng = random.Random(8)
    lengths = [rng.choice([2, 5, 9, 17, 30, 44]) for _ in range(24)]
    windows = [[rng.randrange(65536) for _ in range(n)] for n in lengths]
    packed: list[list[int]] = []

    class Recorded:  # the decoder, recording the lengths of each packed call
        config = tiny_decoder.config

        def __call__(self, codes: torch.Tensor) -> torch.Tensor:
            return tiny_decoder(codes)

        def forward_packed(self, codes: torch.Tensor, lengths: list[int]) -> list[torch.Tensor]:
            packed.append(lengths)
            return tiny_decoder.forward_packed(codes, lengths)

    options = CodecOptions(window_s=0.05, cpu_batch_codes=128)
    worker = CodecWorker(Recorded(), "cpu", options=options)  # type: ignore[arg-type]
    worker.start()
    try:
        results = await asyncio.gather(*(worker.decode(w) for w in windows))
    finally:
        await worker.close()
    assert any(len(set(call)) > 1 for call in packed)  # windows of different lengths shared a call
    assert all(sum(call) <= 128 for call in packed)
    for window, audio in zip(windows, results, strict=True):  # up to the tiny decoder's rounding
        np.testing.assert_allclose(audio, _alone(tiny_decoder, window), atol=5e-5, rtol=0)


async def test_a_cpu_packs_a_far_window_with_an_urgent_one_only_while_the_batch_ends_in_time(
    tiny_decoder: NeuCodecDecoder,
) -> None:
    """At a measured cost of 0.5 s a batch (the decode cost the family passes), a window whose listener
    has a minute left does not join the batch of one due in 0.2 s: they decode in two calls; without a
    measured cost they share one."""
    rng = random.Random(9)
    urgent, far = [rng.randrange(65536) for _ in range(6)], [rng.randrange(65536) for _ in range(30)]

    async def calls(cost: tuple[float, float] | None) -> list[list[int]]:
        """The windows' lengths of each decode call (no startup decodes: no warm-up lengths)."""
        made: list[list[int]] = []

        class Recorded:  # the decoder, recording each call
            config = tiny_decoder.config

            def __call__(self, codes: torch.Tensor) -> torch.Tensor:
                made.append([codes.shape[1]] * codes.shape[0])
                return tiny_decoder(codes)

            def forward_packed(self, codes: torch.Tensor, lengths: list[int]) -> list[torch.Tensor]:
                made.append(lengths)
                return tiny_decoder.forward_packed(codes, lengths)

        options = CodecOptions(window_s=0.2)
        worker = CodecWorker(Recorded(), "cpu", options=options, cost=lambda: cost)  # type: ignore[arg-type]
        worker.start()
        try:
            now = time.monotonic()
            await asyncio.gather(worker.decode(urgent, now + 0.2), worker.decode(far, now + 60))
        finally:
            await worker.close()
        return made

    assert await calls((0.5, 0.0)) == [[6], [30]]
    assert await calls(None) == [[6, 30]]


def snr_db(reference: np.ndarray, other: np.ndarray) -> float:
    return float(10 * np.log10(np.sum(reference**2) / max(np.sum((reference - other) ** 2), 1e-30)))


@pytest.mark.slow
async def test_bf16_batched_decodes_stay_within_30_db_of_fp32() -> None:
    """The official-size random decoder (the small test one is not representative of bf16 rounding)."""
    reference = random_decoder(NeuCodecConfig.official())
    bf16 = random_decoder(NeuCodecConfig.official()).cast(torch.bfloat16)
    rng = random.Random(3)
    windows = [[rng.randrange(65536) for _ in range(rng.choice([64, 96]))] for _ in range(6)]
    worker = CodecWorker(bf16, "cpu", options=CodecOptions(window_s=0.05, batching="on"))
    worker.start()
    try:
        results = await asyncio.gather(*(worker.decode(w) for w in windows))
    finally:
        await worker.close()
    ratios = []
    for window, audio in zip(windows, results, strict=True):
        assert audio.dtype == np.float32
        # bf16 kernels round differently per batch shape, so the measure is the SNR against fp32
        ratios.append(snr_db(_alone(reference, window), audio))
    print(f"bf16 vs fp32 SNR per window (dB): {[round(r, 1) for r in ratios]}")
    assert min(ratios) >= 30


@pytest.mark.slow
async def test_torch_compile_path_decodes_like_eager(tiny_decoder: NeuCodecDecoder) -> None:
    """TORCH_COMPILE=true on a CPU (inductor, one dynamic-shape graph): batched, compiled decodes equal
    the eager lone decodes. Compiling takes tens of seconds cold."""
    # compiling takes tens of seconds cold, minutes on a loaded machine: no batch timeout can fire first
    options = CodecOptions(compile=True, window_s=0.05, timeout_s=600, batching="on")
    worker = CodecWorker(tiny_decoder, "cpu", options=options)
    windows = [[(i * 7919 + n) % 65536 for i in range(n)] for n in (16, 16, 24)]
    worker.start()
    try:
        results = await asyncio.gather(*(worker.decode(w) for w in windows))
    finally:
        await worker.close()
    assert worker.decoder_batcher.stats.sizes[2] == 1  # the two 16-code windows shared a batch
    for window, audio in zip(windows, results, strict=True):
        np.testing.assert_allclose(audio, _alone(tiny_decoder, window), atol=1e-5, rtol=0)
