"""Deadline scheduling of codec work: the pure DeadlineQueue, then the Batcher's threads under EDF
(order, first windows ahead of later ones, no starvation under overload, first-come mode), the
bounded statistics, and the CPU/accelerator batching choice."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import AsyncIterator

import numpy as np
import pytest

from app.codec.batch_stats import BatchStats, Reservoir
from app.codec.batcher import Batcher
from app.codec.deadlines import DeadlineQueue
from app.families.neucodec.codec.worker import CodecOptions

# --- DeadlineQueue -------------------------------------------------------------------------------------


def test_take_serves_the_earliest_deadline_first_ties_by_arrival() -> None:
    queue: DeadlineQueue[str] = DeadlineQueue(key=lambda item: 0)
    for name, deadline in [("c", 3.0), ("a", 1.0), ("b1", 2.0), ("b2", 2.0), ("d", 4.0)]:
        queue.push(name, deadline)
    assert [queue.take(1)[0] for _ in range(5)] == ["a", "b1", "b2", "c", "d"]
    assert queue.take(1) == [] and len(queue) == 0


def test_a_batch_is_the_most_urgent_item_and_its_key_mates_most_urgent_first() -> None:
    queue: DeadlineQueue[tuple[int, float]] = DeadlineQueue(key=lambda item: item[0])
    items = [(64, 9.0), (96, 1.0), (64, 5.0), (96, 8.0), (64, 2.0), (96, 3.0), (96, 7.0)]
    for item in items:
        queue.push(item, item[1])
    assert queue.take(2) == [(96, 1.0), (96, 3.0)]  # 96 holds the earliest deadline
    assert queue.take(8) == [(64, 2.0), (64, 5.0), (64, 9.0)]  # then 64's: never mixed with 96
    assert queue.take(8) == [(96, 7.0), (96, 8.0)]


def test_cancelled_items_are_dropped_and_never_head_a_batch() -> None:
    dead = {"x", "y"}
    queue: DeadlineQueue[str] = DeadlineQueue(key=lambda item: 0, alive=lambda item: item not in dead)
    for name, deadline in [("x", 0.0), ("a", 1.0), ("y", 1.5), ("b", 2.0)]:
        queue.push(name, deadline)
    head = queue.head()
    assert head is not None and head[0] == "a" and head[2] == 2  # two live items share the key
    assert queue.take(4) == ["a", "b"]
    assert queue.head() is None


def test_a_budget_takes_the_most_urgent_items_whose_weights_still_fit() -> None:
    """Weights 100, 50, 40, 20 by deadline under a budget of 130: 100 and 20 (50 and 40 would pass it);
    then 50 and 40; an item heavier than the budget goes alone, never left behind."""
    queue: DeadlineQueue[tuple[str, int]] = DeadlineQueue(key=lambda item: 0, weight=lambda item: item[1])
    for name, weight, deadline in [("a", 100, 1.0), ("b", 50, 2.0), ("c", 40, 3.0), ("d", 20, 4.0)]:
        queue.push((name, weight), deadline)
    head = queue.head()
    assert head is not None and head[2:] == (4, 210)  # four items of the key, 210 in all
    assert [name for name, _ in queue.take(16, budget=130)] == ["a", "d"]
    assert [name for name, _ in queue.take(16, budget=130)] == ["b", "c"]
    queue.push(("e", 500), 5.0)
    queue.push(("f", 10), 6.0)
    assert [name for name, _ in queue.take(16, budget=130)] == ["e"]
    assert [name for name, _ in queue.take(16, budget=130)] == ["f"]


def test_a_window_joins_only_if_the_batch_still_ends_by_the_first_deadline_or_it_is_due_by_then() -> None:
    """A batch of w codes started now (0) ends at w / 100 s. The first window (20 codes, due at 0.5) leaves
    room for 30 more: a 10-code window due at 9 joins (the batch ends at 0.3), a 30-code one due at 9.5
    would end it at 0.6 and waits for the next batch. A 100-code window due at 0.6 joins although the batch
    then ends at 1.2: it could not wait. Unknown ends (None) bound nothing."""

    def names(batch: list[tuple[str, int]]) -> list[str]:
        return [name for name, _ in batch]

    def queue_of(items: list[tuple[str, int, float]]) -> DeadlineQueue[tuple[str, int]]:
        queue: DeadlineQueue[tuple[str, int]] = DeadlineQueue(key=lambda item: 0, weight=lambda item: item[1])
        for name, weight, deadline in items:
            queue.push((name, weight), deadline)
        return queue

    def ends(codes: int) -> float:
        return codes / 100

    queue = queue_of([("a", 20, 0.5), ("far", 10, 9.0), ("farther", 30, 9.5)])
    assert names(queue.take(16, budget=1000, ends=ends)) == ["a", "far"]
    assert names(queue.take(16, budget=1000, ends=ends)) == ["farther"]
    queue = queue_of([("a", 20, 0.5), ("soon", 100, 0.6), ("far", 10, 9.0)])
    assert names(queue.take(16, budget=1000, ends=ends)) == ["a", "soon"]
    queue = queue_of([("a", 20, 0.5), ("soon", 100, 0.6), ("far", 10, 9.0)])
    assert names(queue.take(16, budget=1000, ends=lambda codes: None)) == ["a", "soon", "far"]


def test_edf_matches_a_sort_on_random_workloads() -> None:
    rng = random.Random(7)
    queue: DeadlineQueue[tuple[int, float, int]] = DeadlineQueue(key=lambda item: item[0])
    items = [
        (rng.choice((64, 96, 128)), rng.choice((0.0, 1.0, 2.0, rng.random() * 5)), i) for i in range(300)
    ]
    for item in items:
        queue.push(item, item[1])
    served = []
    while batch := queue.take(rng.choice((1, 4, 16))):
        assert len({item[0] for item in batch}) == 1  # one key per batch
        head = min(set(items) - set(served), key=lambda item: (item[1], item[2]))
        assert batch[0] == head  # the most urgent item leads the batch
        served += batch
    assert sorted(served) == sorted(items)


# --- Batcher under EDF -------------------------------------------------------------------------------


class Device:
    """prepare/run of a Batcher of (name, key) items: records batches; ``gate`` holds the device busy."""

    def __init__(self, run_s: float = 0.0) -> None:
        self.batches: list[list[str]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()
        self.run_s = run_s

    def run(self, items: list[tuple[str, int]]) -> tuple[list[str | BaseException], bool]:
        self.started.set()
        assert self.gate.wait(timeout=30)
        if self.run_s:
            time.sleep(self.run_s)
        self.batches.append([name for name, _ in items])
        return [name for name, _ in items], False


@pytest.fixture
async def device() -> AsyncIterator[Device]:
    dev = Device()
    yield dev
    dev.gate.set()


def make(device: Device, **kwargs: object) -> Batcher[tuple[str, int], str, list[tuple[str, int]]]:
    options: dict = {"window_s": 0.0, "max_batch": 16, "timeout_s": 30.0, "key": lambda item: item[1]}
    options.update(kwargs)
    return Batcher("decode", prepare=list, run=device.run, **options)


async def occupy(device: Device, batcher: Batcher) -> asyncio.Task:
    """Submit one item and wait until the device is busy with it (the gate is closed)."""
    device.gate.clear()
    busy = asyncio.create_task(batcher.submit(("busy", -1)))
    await asyncio.to_thread(device.started.wait, 10)
    return busy


async def test_queued_windows_run_in_deadline_order(device: Device) -> None:
    batcher = make(device, max_batch=1)
    batcher.start()
    try:
        busy = await occupy(device, batcher)
        now = time.monotonic()
        offsets = {"w3": 3.0, "w1": 1.0, "first": None, "w2": 2.0, "w0": 0.5}
        tasks = [
            asyncio.create_task(batcher.submit((name, 0), None if off is None else now + off))
            for name, off in offsets.items()
        ]
        await asyncio.sleep(0.05)
        device.gate.set()
        await asyncio.gather(busy, *tasks)
    finally:
        await batcher.close()
    assert device.batches == [["busy"], ["first"], ["w0"], ["w1"], ["w2"], ["w3"]]


@pytest.mark.parametrize("same_length", [True, False])
async def test_a_first_window_never_waits_behind_a_full_batch_of_later_windows(
    device: Device, same_length: bool
) -> None:
    batcher = make(device, max_batch=4)
    batcher.start()
    try:
        busy = await occupy(device, batcher)
        later = time.monotonic() + 5.0  # their listeners have 5 s of audio buffered
        tasks = [asyncio.create_task(batcher.submit((f"later{i}", 0), later + i)) for i in range(8)]
        await asyncio.sleep(0.02)  # the later windows were queued first
        first = asyncio.create_task(batcher.submit(("first", 0 if same_length else 1)))
        await asyncio.sleep(0.02)
        device.gate.set()
        await asyncio.gather(busy, first, *tasks)
    finally:
        await batcher.close()
    assert "first" in device.batches[1]  # right after the batch that was running when it came
    if same_length:
        assert device.batches[1] == ["first", "later0", "later1", "later2"]  # fills spare slots
    else:
        assert device.batches[1] == ["first"]


async def test_first_come_mode_ignores_deadlines(device: Device) -> None:
    batcher = make(device, max_batch=1, deadlines=False)
    batcher.start()
    try:
        busy = await occupy(device, batcher)
        now = time.monotonic()
        tasks = [asyncio.create_task(batcher.submit((f"w{i}", 0), now + 10 - i)) for i in range(4)]
        await asyncio.sleep(0.05)
        device.gate.set()
        await asyncio.gather(busy, *tasks)
    finally:
        await batcher.close()
    assert device.batches == [["busy"], ["w0"], ["w1"], ["w2"], ["w3"]]


async def test_a_burst_of_first_windows_on_one_at_a_time_is_served_in_arrival_order() -> None:
    """max_batch=1 (a CPU): the first of a burst is done after one decode, not after the whole burst."""
    device = Device(run_s=0.05)
    batcher = make(device, max_batch=1)
    batcher.start()
    done: dict[str, float] = {}

    async def first_window(name: str) -> None:
        await batcher.submit((name, 0))
        done[name] = time.monotonic()

    try:
        started = time.monotonic()
        await asyncio.gather(*(first_window(f"s{i}") for i in range(6)))
    finally:
        await batcher.close()
    assert device.batches == [[f"s{i}"] for i in range(6)]
    assert done["s0"] - started < 0.05 * 3  # not held for the other five (0.3 s)


async def test_no_stream_starves_under_overload() -> None:
    """New first windows (due at once) arrive twice as fast as the device serves them; a later window
    due in 0.3 s is still served within its deadline plus what was due before it, not at the end."""
    device = Device(run_s=0.01)
    batcher = make(device, max_batch=1, timeout_s=60)
    batcher.start()
    stop = asyncio.Event()
    firsts: list[asyncio.Task] = []

    async def flood() -> None:
        i = 0
        while not stop.is_set():
            firsts.append(asyncio.create_task(batcher.submit((f"f{i}", 0))))
            i += 1
            await asyncio.sleep(0.005)

    producer = asyncio.create_task(flood())
    try:
        await asyncio.sleep(0.1)
        submitted = time.monotonic()
        await asyncio.wait_for(batcher.submit(("later", 0), submitted + 0.3), timeout=3.0)
        waited = time.monotonic() - submitted
        assert not stop.is_set() and len(batcher._queue) > 20  # still overloaded when it was served
    finally:
        stop.set()
        await producer
        for task in firsts:
            task.cancel()
        await asyncio.gather(*firsts, return_exceptions=True)
        await batcher.close()
    # due before it: the backlog at submit (~10 items) and the arrivals of 0.3 s (~60), 10 ms each
    assert waited < 0.3 + 0.1 + 0.6 + 0.5


# --- bounded statistics and the batching choice --------------------------------------------------------


def test_reservoir_is_bounded_and_keeps_exact_aggregates() -> None:
    reservoir = Reservoir(capacity=100, seed=1)
    values = np.random.default_rng(0).uniform(0, 1, 20_000)
    for value in values:
        reservoir.add(float(value))
    assert len(reservoir.sample) == 100 and reservoir.count == 20_000
    assert reservoir.max == pytest.approx(values.max()) and reservoir.last == values[-1]
    assert reservoir.mean == pytest.approx(values.mean())
    assert abs(reservoir.percentile(50) - 0.5) < 0.15  # a uniform sample of a uniform stream


def test_reservoir_percentiles_are_exact_below_capacity() -> None:
    reservoir = Reservoir(capacity=100)
    for value in range(1, 11):
        reservoir.add(float(value))
    assert reservoir.percentile(50) == 5.5 and reservoir.percentile(100) == 10


async def test_batch_stats_stay_bounded_over_many_decodes(device: Device) -> None:
    batcher = make(device, max_batch=4)
    batcher.start()
    try:
        for round_ in range(40):
            await asyncio.gather(*(batcher.submit((f"{round_}.{i}", i % 3)) for i in range(50)))
    finally:
        await batcher.close()
    stats: BatchStats = batcher.stats
    assert stats.waits_s.count == 2000 and len(stats.waits_s.sample) <= stats.waits_s.capacity < 2000
    assert stats.compute_s.count == sum(stats.sizes.values()) and len(stats.compute_s.sample) <= 1024
    assert set(stats.sizes) <= {1, 2, 3, 4}


@pytest.mark.parametrize(
    ("batching", "accelerator", "packs", "budget", "batch"),
    [
        ("auto", False, True, 128, 16),  # a CPU: any lengths, packed, up to 128 codes
        ("auto", True, False, None, 16),  # an accelerator: windows of one length
        ("on", False, False, None, 16),
        ("off", True, False, None, 1),
        ("off", False, False, None, 1),
    ],
)
def test_a_cpu_packs_windows_of_any_length_within_its_code_budget(
    batching: str, accelerator: bool, packs: bool, budget: int | None, batch: int
) -> None:
    options = CodecOptions(max_batch=16, batching=batching, cpu_batch_codes=128)
    assert options.packs(accelerator) is packs
    assert options.decode_budget(accelerator) == budget
    assert options.decode_batch() == batch


async def test_a_cpu_batches_a_burst_of_windows_within_its_code_budget(device: Device) -> None:
    """Queued behind a busy device: seven 20-code windows, two 64-code ones and two of 200 codes under a
    128-code budget, any lengths together: the most urgent first, each batch taking the next windows that
    still fit (six of 20; the seventh with a 64; the other 64 alone), a 200-code window alone."""
    options = CodecOptions(max_batch=16, cpu_batch_codes=128)
    budget = options.decode_budget(False)
    batcher = make(device, key=lambda item: 0, weight=lambda item: item[1], budget=budget)
    batcher.start()
    try:
        busy = await occupy(device, batcher)
        items = [(f"a{i}", 20, float(i)) for i in range(7)] + [("b0", 64, 7.5), ("b1", 64, 8.0)]
        items += [("c0", 200, 9.0), ("c1", 200, 9.5)]
        tasks = [asyncio.create_task(batcher.submit((name, n), deadline)) for name, n, deadline in items]
        await asyncio.sleep(0.05)
        device.gate.set()
        await asyncio.gather(busy, *tasks)
    finally:
        await batcher.close()
    assert device.batches[1:] == [[f"a{i}" for i in range(6)], ["a6", "b0"], ["b1"], ["c0"], ["c1"]]
