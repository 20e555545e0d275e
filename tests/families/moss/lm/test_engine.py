"""MossFrameEngine on the tiny checkpoint: batched == alone with rows joining and leaving, cancel within one
step, per-row sampling, a failing row, end of speech, admission limits and shutdown."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import app.families.moss.lm.engine as engine_module
from app.core.errors import BackendError, InvalidRequest, RateLimited, Unavailable
from app.families.moss.lm.engine import MossFrameEngine
from app.families.moss.lm.loader import LoadedMoss, load_moss_lm
from app.families.moss.lm.prompt import MossPrompter
from app.families.moss.lm.types import FrameJob, FrameSampling, Turn

ROOT = Path(__file__).resolve().parents[4]
GREEDY = FrameSampling(temperature=0.0)


@pytest.fixture(scope="module")
def loaded(moss_tts_dir: Path) -> LoadedMoss:
    return load_moss_lm(str(moss_tts_dir))


@pytest.fixture(scope="module")
def prompter(loaded: LoadedMoss) -> MossPrompter:
    return MossPrompter(loaded.tokenizer, loaded.ids)


@pytest.fixture(scope="module")
def endless(plain_moss_tts_dir: Path) -> LoadedMoss:
    """The model without the planted stop (a turn runs to its frame cap), for the tests whose first
    request must outlive other requests' prefills by more than a few seconds of frames."""
    return load_moss_lm(str(plain_moss_tts_dir))


def reference(seed: int, n: int = 6) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1024, size=(n, 16))


async def collect(
    engine: MossFrameEngine, job: FrameJob, on_chunk: Callable[[int], None] | None = None
) -> np.ndarray:
    chunks = []
    async for frames in engine.stream(job):
        assert frames.ndim == 2 and frames.shape[1] == 16 and len(frames) >= 1 and frames.dtype == np.int64
        assert frames.min() >= 0 and frames.max() < 1024
        chunks.append(frames)
        if on_chunk is not None:
            on_chunk(sum(len(c) for c in chunks))
    return np.concatenate(chunks) if chunks else np.zeros((0, 16), dtype=np.int64)


async def alone(loaded: LoadedMoss, job: FrameJob, **options: Any) -> np.ndarray:
    engine = MossFrameEngine(loaded, **options)
    engine.start()
    try:
        return await collect(engine, job)
    finally:
        await engine.close()


def jobs(prompter: MossPrompter, sampled: bool) -> list[FrameJob]:
    def sampling(seed: int, **kw: Any) -> FrameSampling:
        return FrameSampling(seed=seed, **kw) if sampled else GREEDY

    turn = Turn(text_ids=prompter.text_ids("Earlier words."), frames=reference(9, 4))
    return [
        prompter.job(
            "The first request speaks a long sentence.",
            reference=reference(1),
            max_frames=120,
            sampling=sampling(11),
        ),
        prompter.job(
            "Short.", reference=None, max_frames=20, sampling=sampling(12, temperature=1.0, top_k=5)
        ),
        prompter.job(
            "你好，世界。Selamat datang!",
            reference=reference(2, 3),
            history=[turn],
            max_frames=9,
            sampling=sampling(13, top_p=0.9, repetition_penalty=1.3, repetition_window=3),
        ),
        prompter.job("வணக்கம், ஒரு நீண்ட வாக்கியம்.", reference=reference(3), max_frames=7, sampling=sampling(14)),
    ]


@pytest.mark.parametrize("sampled", [False, True], ids=["greedy", "sampled"])
async def test_a_request_in_a_changing_batch_makes_its_frames_alone(
    endless: LoadedMoss, prompter: MossPrompter, sampled: bool
) -> None:
    loaded = endless
    todo = jobs(prompter, sampled)
    options = {"prefill_chunk": 32}
    expected = [await alone(loaded, job, **options) for job in todo]
    assert [len(e) for e in expected] == [120, 20, 9, 7]  # no planted stop: max_frames ends them
    engine = MossFrameEngine(loaded, max_batch=4, **options)
    engine.start()
    try:
        second_joins, third_joins = asyncio.Event(), asyncio.Event()

        def first_progress(n: int) -> None:
            if n >= 2:
                second_joins.set()
            if n >= 4:
                third_joins.set()

        async def later(event: asyncio.Event, job: FrameJob) -> np.ndarray:
            await event.wait()
            return await collect(engine, job)

        got = await asyncio.gather(
            collect(engine, todo[0], first_progress),
            later(second_joins, todo[1]),
            later(third_joins, todo[2]),
            later(third_joins, todo[3]),
        )
    finally:
        await engine.close()
    assert engine.peak_rows >= 3  # they really shared steps, joining while others ran
    for want, have in zip(expected, got, strict=True):
        assert np.array_equal(want, have)


async def test_seeds_make_sampling_reproducible_per_row(loaded: LoadedMoss, prompter: MossPrompter) -> None:
    def job(seed: int | None) -> FrameJob:
        return prompter.job(
            "Seeds decide.",
            reference=None,
            max_frames=6,
            sampling=FrameSampling(temperature=1.0, top_p=0.95, top_k=100, seed=seed),
        )

    engine = MossFrameEngine(loaded)
    engine.start()
    try:
        a, b, c, d = await asyncio.gather(*(collect(engine, job(s)) for s in (1, 1, 2, None)))
    finally:
        await engine.close()
    assert np.array_equal(a, b) and not np.array_equal(a, c) and len(d) == 6


async def test_closing_a_stream_removes_its_row_within_one_step(
    loaded: LoadedMoss, prompter: MossPrompter, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = MossFrameEngine(loaded)
    long_job = prompter.job("This one is cancelled.", reference=None, max_frames=500, sampling=GREEDY)
    other = prompter.job("This one runs on.", reference=None, max_frames=30, sampling=GREEDY)
    seen: dict[str, int] = {}  # the engine's step count when the close asked, and when the row left

    class Watched(engine_module.Handoff):
        async def close(self) -> None:
            seen.setdefault("closed", engine.steps)
            await super().close()

    finish = engine.finish

    def watched_finish(row: Any, reason: Any = None, error: Any = None) -> None:
        if reason == "cancelled":
            seen["left"] = engine.steps
        finish(row, reason, error)

    monkeypatch.setattr(engine_module, "Handoff", Watched)
    engine.finish = watched_finish  # type: ignore[method-assign]
    engine.start()
    try:
        other_task = asyncio.create_task(collect(engine, other))
        stream = engine.stream(long_job)
        assert isinstance(stream, AsyncGenerator)
        await stream.__anext__()
        await stream.__anext__()
        await stream.aclose()
        # the step in flight when the close asked may finish with the row; the next one runs without it
        # (the steps counted after aclose returns are the other row's, which runs on meanwhile)
        assert seen["left"] - seen["closed"] <= 1
        rest = await other_task
    finally:
        await engine.close()
    assert engine.active == 0
    assert np.array_equal(rest, await alone(loaded, other))


async def test_a_failing_row_fails_alone(
    loaded: LoadedMoss, prompter: MossPrompter, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = engine_module.choose_codes
    draws: list[int] = []

    def choose(logits: torch.Tensor, head: int, recent: torch.Tensor, settings: Any, frames: Any) -> Any:
        doomed = settings.seed_lo == 777
        if bool(doomed.any()):
            draws.append(1)
            if len(draws) > 20:  # mid-stream, after its first frame went out: its logits go NaN
                logits = logits.float().masked_fill(doomed[:, None], float("nan"))
        return real(logits, head, recent, settings, frames)

    good = prompter.job("The good row.", reference=None, max_frames=8, sampling=FrameSampling(seed=5))
    bad = prompter.job("The bad row.", reference=None, max_frames=8, sampling=FrameSampling(seed=777))
    expected = await alone(loaded, good)
    monkeypatch.setattr(engine_module, "choose_codes", choose)
    engine = MossFrameEngine(loaded)
    engine.start()
    bad_frames: list[np.ndarray] = []

    async def bad_stream() -> None:
        async for frames in engine.stream(bad):
            bad_frames.append(frames)

    try:
        results = await asyncio.gather(collect(engine, good), bad_stream(), return_exceptions=True)
        assert engine.ready()
    finally:
        await engine.close()
    assert np.array_equal(results[0], expected)
    assert isinstance(results[1], BackendError) and "not finite" in str(results[1])
    assert sum(len(f) for f in bad_frames) == 1  # its first frame, then the failure


async def test_eos_on_codebook_zero_ends_the_stream_unyielded(
    loaded: LoadedMoss, prompter: MossPrompter, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = engine_module.choose_codes

    def choose(logits: torch.Tensor, head: int, recent: torch.Tensor, *args: Any) -> Any:
        codes, failed = real(logits, head, recent, *args)
        if head == 0:  # EOS once a row has made 3 frames
            codes = torch.where((recent >= 0).sum(1) == 3, 1026, codes)
        return codes, failed

    monkeypatch.setattr(engine_module, "choose_codes", choose)
    job = prompter.job("Ends early.", reference=None, max_frames=50, sampling=GREEDY)
    assert len(await alone(loaded, job)) == 3


async def test_admission_waits_for_rows_and_the_cache_budget(
    loaded: LoadedMoss, prompter: MossPrompter
) -> None:
    job = prompter.job("Wait your turn.", reference=None, max_frames=5, sampling=GREEDY)
    rows = len(job.prefill) + job.max_frames
    for options in ({"max_batch": 1}, {"max_cached_rows": rows + 1}):
        engine = MossFrameEngine(loaded, **options)
        engine.start()
        try:
            results = await asyncio.gather(*(collect(engine, job) for _ in range(3)))
        finally:
            await engine.close()
        assert engine.peak_rows == 1 and all(np.array_equal(r, results[0]) for r in results)


async def test_refusals_come_before_any_frame(loaded: LoadedMoss, prompter: MossPrompter) -> None:
    job = prompter.job("Busy.", reference=None, max_frames=300, sampling=GREEDY)
    engine = MossFrameEngine(loaded, max_batch=1, max_waiting=0, max_cached_rows=1000)
    engine.start()
    try:
        first = engine.stream(job)
        await first.__anext__()
        with pytest.raises(RateLimited):
            await engine.stream(job).__anext__()
        await first.aclose()
        too_long = prompter.job("Long.", reference=None, max_frames=990, sampling=GREEDY)
        with pytest.raises(InvalidRequest, match="cache budget"):
            await engine.stream(too_long).__anext__()
        for bad in (
            FrameSampling(temperature=-1),
            FrameSampling(top_p=0),
            FrameSampling(repetition_window=-2),
        ):
            with pytest.raises(InvalidRequest):
                await engine.stream(
                    prompter.job("Bad.", reference=None, max_frames=2, sampling=bad)
                ).__anext__()
        past_window = prompter.job("Long.", reference=None, max_frames=loaded.max_positions, sampling=GREEDY)
        with pytest.raises(InvalidRequest, match="positions"):
            await engine.stream(past_window).__anext__()
    finally:
        await engine.close()


async def test_close_ends_open_streams_with_unavailable(loaded: LoadedMoss, prompter: MossPrompter) -> None:
    engine = MossFrameEngine(loaded)
    engine.start()
    assert engine.ready() and engine.details()["device"] == "cpu"
    assert engine.row_bytes() == 2 * 2 * 2 * 8 * 4  # K and V x 2 layers x 2 kv heads x head_dim 8, float32
    stream = engine.stream(prompter.job("Open.", reference=None, max_frames=1000, sampling=GREEDY))
    await stream.__anext__()
    await engine.close()
    assert not engine.ready()
    with pytest.raises(Unavailable):
        while True:
            await stream.__anext__()
    with pytest.raises(Unavailable):
        await engine.stream(prompter.job("Late.", reference=None, max_frames=1)).__anext__()


def test_npu_path_with_a_stand_in_torch_npu() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.families.moss.lm.npu_check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "moss lm npu path ok" in done.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
async def test_cuda_defaults_and_batched_equals_alone_on_cuda(moss_tts_dir: Path) -> None:
    cuda = load_moss_lm(str(moss_tts_dir), device="cuda", dtype="auto")
    assert cuda.dtype == torch.bfloat16 and cuda.attention == "sdpa"
    exact = load_moss_lm(str(moss_tts_dir), device="cuda", dtype="float32")
    prompter = MossPrompter(exact.tokenizer, exact.ids)
    todo = jobs(prompter, sampled=False)
    expected = [await alone(exact, job) for job in todo]
    engine = MossFrameEngine(exact)
    engine.start()
    try:
        got = await asyncio.gather(*(collect(engine, job) for job in todo))
    finally:
        await engine.close()
    for want, have in zip(expected, got, strict=True):
        assert (want == have).mean() > 0.9  # TF32/kernel choice may flip near-ties on a GPU
    assert len(await alone(cuda, todo[1])) == 20


async def test_a_broken_loop_fails_its_rows_instead_of_hanging(
    loaded: LoadedMoss, prompter: MossPrompter, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("loop bug")

    monkeypatch.setattr(MossFrameEngine, "_admit", broken)
    engine = MossFrameEngine(loaded)
    engine.start()
    job = prompter.job("Never runs.", reference=None, max_frames=3)
    try:
        with pytest.raises(BackendError, match="loop bug"):
            await asyncio.wait_for(collect(engine, job), timeout=30)
        with pytest.raises(Unavailable):
            await engine.stream(job).__anext__()
        assert not engine.ready()
    finally:
        await engine.close()


@pytest.mark.parametrize("sampled", [False, True], ids=["greedy", "sampled"])
async def test_requests_prefilled_together_each_make_their_frames_alone(
    loaded: LoadedMoss, prompter: MossPrompter, sampled: bool
) -> None:
    todo = jobs(prompter, sampled)
    lengths = {len(job.prefill) for job in todo}
    assert len(lengths) >= 3  # prompts of several lengths: the shorter ones are left-padded in the group
    options = {"prefill_chunk": 48}  # several chunks, 12 columns each for 4 rows
    expected = [await alone(loaded, job, **options) for job in todo]
    engine = MossFrameEngine(loaded, max_batch=4, **options)
    queued = threading.Event()  # the loop starts once all four wait, so that one group takes them
    setup = engine.setup

    def setup_once_queued() -> None:
        queued.wait(30)
        setup()

    engine.setup = setup_once_queued  # type: ignore[method-assign]
    engine.start()
    try:
        tasks = [asyncio.ensure_future(collect(engine, job)) for job in todo]
        async with asyncio.timeout(30):
            while engine.pending < len(todo):
                await asyncio.sleep(0.005)
        queued.set()
        got = await asyncio.gather(*tasks)
    finally:
        queued.set()
        await engine.close()
    assert engine.peak_group == 4 and engine.peak_rows == 4
    for want, have in zip(expected, got, strict=True):
        assert np.array_equal(want, have)
    one_by_one = MossFrameEngine(loaded, max_batch=4, prefill_rows=1, **options)
    one_by_one.start()
    try:
        again = await asyncio.gather(*(collect(one_by_one, job) for job in todo))
    finally:
        await one_by_one.close()
    assert one_by_one.peak_group == 1
    for want, have in zip(expected, again, strict=True):
        assert np.array_equal(want, have)


async def test_a_running_stream_gets_a_frame_between_any_two_prefill_chunks(
    endless: LoadedMoss, prompter: MossPrompter, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = endless  # the runner outlives three long prefills: over 100 frames
    runner = prompter.job("I keep talking.", reference=None, max_frames=300, sampling=GREEDY)
    newcomers = [
        prompter.job(f"Newcomer {i} with a long voice prompt.", reference=reference(20 + i, 30), max_frames=3)
        for i in range(3)
    ]
    expected = await alone(loaded, runner)
    forwards: list[tuple[str, int]] = []  # ("prefill" | "step", rows in the forward)
    real = loaded.model.backbone

    def backbone(rows: torch.Tensor, *args: Any) -> Any:
        kind = "step" if rows.shape[1] == 1 else "prefill"
        forwards.append((kind, int(rows.shape[0])))
        return real(rows, *args)

    monkeypatch.setattr(loaded.model, "backbone", backbone)
    engine = MossFrameEngine(loaded, prefill_chunk=12)  # 4 columns per chunk for a group of 3
    engine.start()
    try:
        running = engine.stream(runner)
        first = await running.__anext__()
        joined = len(forwards)
        rest = [first]

        async def keep_reading() -> None:
            async for frames in running:
                rest.append(frames)

        others = await asyncio.gather(keep_reading(), *(collect(engine, job) for job in newcomers))
    finally:
        await engine.close()
    assert np.array_equal(np.concatenate(rest), expected)  # unharmed by the others' prefill
    assert all(len(frames) == 3 for frames in others[1:])
    later = forwards[joined:]
    chunks = [i for i, (kind, _) in enumerate(later) if kind == "prefill"]
    assert len(chunks) >= 50 and engine.peak_group == 3  # the newcomers' long prompts: many chunks
    assert len(later) - chunks[-1] > 100  # all while the runner ran: it outlived their prefill
    assert all(rows * 4 <= 12 for kind, rows in later if kind == "prefill")
    assert all(later[i + 1][0] == "step" for i in chunks)  # the runner steps after every chunk


async def test_a_request_cancelled_mid_prefill_leaves_its_group(
    loaded: LoadedMoss, prompter: MossPrompter, monkeypatch: pytest.MonkeyPatch
) -> None:
    todo = jobs(prompter, sampled=True)[:3]
    expected = [await alone(loaded, job, prefill_chunk=30) for job in todo]
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[np.ndarray]] = []
    sizes: list[int] = []  # rows of each prefill forward
    real = loaded.model.backbone

    cancelled = threading.Event()

    def cancel_first() -> None:
        tasks[0].cancel()
        loop.call_soon(cancelled.set)  # after the task's step that closes its stream

    def backbone(rows: torch.Tensor, *args: Any) -> Any:
        if rows.shape[1] > 1:
            sizes.append(int(rows.shape[0]))
            if len(sizes) == 3:  # mid-prefill: the first request's stream is closed before this forward ends
                loop.call_soon_threadsafe(cancel_first)
                assert cancelled.wait(timeout=10)
        return real(rows, *args)

    monkeypatch.setattr(loaded.model, "backbone", backbone)
    engine = MossFrameEngine(loaded, prefill_chunk=30)
    engine.start()
    try:
        tasks.extend(asyncio.create_task(collect(engine, job)) for job in todo)
        results = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await engine.close()
    assert isinstance(results[0], asyncio.CancelledError)
    assert sizes == [3, 3, 3] + [2] * (len(sizes) - 3) and sizes[-1] == 2  # it left within one step
    assert engine.peak_rows == 2
    for want, have in zip(expected[1:], results[1:], strict=True):
        assert np.array_equal(want, have)
