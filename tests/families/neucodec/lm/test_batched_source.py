"""The batched in-process engine on the tiny random LM (float32): batched equals alone, join/leave, grouped
prefill, cancellation (decoding and mid-prefill), per-row parameters, a failing row, the batch and cache
bounds, shutdown, and the settings."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import torch

from app.core.errors import BackendError, Unavailable
from app.families.neucodec.family import build_source
from app.families.neucodec.lm import engine as engine_module
from app.families.neucodec.lm.engine import SpeechTokenEngine
from app.families.neucodec.lm.transformers_source import TransformersTokenSource
from app.families.neucodec.lm.types import GenerationParams, TokenStream
from app.families.neucodec.speech_tokens import SPEECH_CODES
from tests.conftest import make_settings


def batched(tiny_lm_dir: Path, batch_size: int = 8, **kwargs: Any) -> TransformersTokenSource:
    """The in-process source decoding up to ``batch_size`` generations together (float32)."""
    return TransformersTokenSource(
        str(tiny_lm_dir), device="cpu", dtype="float32", batch_size=batch_size, **kwargs
    )


PARAMS = GenerationParams(
    prompt="<|im_start|>jenny: Hello there!<|speech_start|>",
    model="tiny",
    max_tokens=12,
    temperature=1.0,
    repetition_penalty=1.15,
    top_k=50,
    top_p=0.9,
)


def params(words: int = 0, **changes: object) -> GenerationParams:
    """PARAMS with ``words`` extra words in the prompt (prompts of different lengths pad differently)."""
    prompt = PARAMS.prompt.replace("Hello", "Hello " + "again " * words)
    return dataclasses.replace(PARAMS, prompt=prompt, **changes)


# greedy and sampled rows, different prompt lengths, seeds and lengths (rows leave at different steps)
MIX = [
    params(0, seed=1, max_tokens=60),
    params(3, temperature=0.0, max_tokens=30),
    params(7, seed=2, max_tokens=40, top_k=None, top_p=None, repetition_penalty=1.0),
    params(1, seed=3, max_tokens=20, temperature=0.7),
    params(12, temperature=0.0, repetition_penalty=1.3, max_tokens=45),
    params(2, seed=4, max_tokens=35, top_p=0.5),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def source(tiny_lm_dir: Path) -> AsyncIterator[TransformersTokenSource]:
    lm = batched(tiny_lm_dir, prefill_chunk=5)
    await lm.start()
    yield lm
    await lm.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def alone(source: TransformersTokenSource, tiny_lm_dir: Path) -> dict[GenerationParams, list[int]]:
    """Each MIX request's codes generated alone, by the one-at-a-time engine."""
    single = TransformersTokenSource(str(tiny_lm_dir), device="cpu", dtype="float32")
    await single.start()
    try:
        return {p: (await run(single.generate(p)))[0] for p in MIX}
    finally:
        await single.close()


async def run(stream: TokenStream) -> tuple[list[int], str | None]:
    codes: list[int] = []
    async for delta in stream:
        assert delta, "deltas are never empty"
        codes += delta
    return codes, stream.finish_reason


async def run_after(event: asyncio.Event, stream: TokenStream) -> tuple[list[int], str | None]:
    await event.wait()
    return await run(stream)


async def first_then_rest(stream: TokenStream, started: asyncio.Event) -> tuple[list[int], str | None]:
    """Run ``stream``, setting ``started`` once its first codes arrived (others join mid-flight)."""
    codes = list(await anext(aiter(stream)))
    started.set()
    rest, finish = await run(stream)
    return codes + rest, finish


async def test_batched_equals_alone_with_rows_joining_and_leaving(
    source: TransformersTokenSource, alone: dict[GenerationParams, list[int]]
) -> None:
    started = asyncio.Event()
    first = first_then_rest(source.generate(MIX[0]), started)
    later = [run_after(started, source.generate(p)) for p in MIX[1:]]
    results = await asyncio.gather(first, *later)
    for p, (codes, finish) in zip(MIX, results, strict=True):
        assert codes == alone[p], p
        assert finish == ("length" if len(codes) == p.max_tokens else "stop")
    assert source.engine is not None and source.engine.peak_rows >= 3  # they really shared decode steps


async def test_requests_prefilled_together_each_generate_their_codes_alone(
    tiny_lm_dir: Path, alone: dict[GenerationParams, list[int]]
) -> None:
    for rows, group in ((None, len(MIX)), (1, 1), (4, 4)):
        lm = batched(tiny_lm_dir, prefill_chunk=16, prefill_rows=rows)
        await lm.start()
        engine = lm.engine
        assert engine is not None
        lengths = {len(lm.tokenizer(p.prompt).input_ids) for p in MIX}
        assert len(lengths) == len(MIX)  # all but the longest prompt are left-padded in the group
        try:
            results = await asyncio.gather(*(run(lm.generate(p)) for p in MIX))
        finally:
            await lm.close()
        assert [codes for codes, _ in results] == [alone[p] for p in MIX], rows
        assert engine.peak_group == group and engine.peak_rows == len(MIX)


def record_forwards(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """Record the engine thread's forwards as ("prefill", rows, columns) or ("decode", rows, 1), in order."""
    forwards: list[tuple[str, int, int]] = []
    prefill, decode = SpeechTokenEngine._prefill_step, SpeechTokenEngine._step

    def prefill_step(engine: SpeechTokenEngine, group: Any, batch: Any) -> None:
        inputs, _, _ = group.next_chunk(engine.prefill_chunk)
        forwards.append(("prefill", *inputs.shape))
        prefill(engine, group, batch)

    def decode_step(engine: SpeechTokenEngine, batch: Any) -> None:
        forwards.append(("decode", len(batch.rows), 1))
        decode(engine, batch)

    monkeypatch.setattr(SpeechTokenEngine, "_prefill_step", prefill_step)
    monkeypatch.setattr(SpeechTokenEngine, "_step", decode_step)
    return forwards


async def test_a_running_stream_decodes_between_any_two_prefill_chunks(
    plain_lm_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = params(0, temperature=0.0, max_tokens=400)  # no planted stop: it outlives the others' prefill
    single = TransformersTokenSource(str(plain_lm_dir), device="cpu", dtype="float32")
    await single.start()
    try:
        expected = await run(single.generate(runner))
    finally:
        await single.close()
    lm = batched(plain_lm_dir, prefill_chunk=12)
    forwards = record_forwards(monkeypatch)
    await lm.start()
    assert lm.engine is not None
    engine = lm.engine
    try:
        started = asyncio.Event()
        running = asyncio.create_task(first_then_rest(lm.generate(runner), started))
        await started.wait()
        joined = len(forwards)
        newcomers = [lm.generate(params(30 + i, seed=i, max_tokens=3)) for i in range(3)]
        others = await asyncio.gather(*(run(stream) for stream in newcomers))
        assert await running == expected  # unharmed by the others' prefill
    finally:
        await lm.close()
    assert all(len(codes) == 3 for codes, _ in others)
    later = forwards[joined:]
    chunks = [i for i, (kind, _, _) in enumerate(later) if kind == "prefill"]
    assert len(chunks) >= 15 and engine.peak_group == 3  # the newcomers' long prompts: many chunks of 3 rows
    assert all(rows * columns <= 12 for kind, rows, columns in later if kind == "prefill")
    assert all(later[i + 1][0] == "decode" for i in chunks)  # the runner decodes after every chunk


async def test_a_request_cancelled_mid_prefill_leaves_its_group(
    tiny_lm_dir: Path, alone: dict[GenerationParams, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    todo = MIX[:3]
    lm = batched(tiny_lm_dir, prefill_chunk=6)
    forwards = record_forwards(monkeypatch)
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[tuple[list[int], str | None]]] = []
    real = SpeechTokenEngine._prefill_step

    gone = threading.Event()  # set once the first task has ended (its handoff is cancelled by then)

    def prefill_step(engine: SpeechTokenEngine, group: Any, batch: Any) -> None:
        if len(forwards) == 3:  # mid-prefill: the first request's stream is closed
            loop.call_soon_threadsafe(tasks[0].cancel)
            real(engine, group, batch)
            # the engine thread waits for the loop to deliver the cancel, however busy the machine
            assert gone.wait(timeout=30)
            return
        real(engine, group, batch)

    monkeypatch.setattr(SpeechTokenEngine, "_prefill_step", prefill_step)
    await lm.start()
    try:
        tasks.extend(asyncio.create_task(run(lm.generate(p))) for p in todo)
        tasks[0].add_done_callback(lambda _: gone.set())
        results = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await lm.close()
    assert isinstance(results[0], asyncio.CancelledError)
    assert [codes for codes, _ in results[1:]] == [alone[p] for p in todo[1:]]  # type: ignore[misc]
    sizes = [rows for kind, rows, _ in forwards if kind == "prefill"]
    assert sizes[:4] == [3] * 4 and sizes[4:] and set(sizes[4:]) == {2}  # it left after the 4th chunk


async def test_rows_keep_their_own_seeds_and_parameters(source: TransformersTokenSource) -> None:
    same = [
        params(0, seed=9, max_tokens=10),
        params(0, seed=9, max_tokens=10),
        params(0, seed=10, max_tokens=10),
    ]
    (a, _), (b, _), (c, _) = await asyncio.gather(*(run(source.generate(p)) for p in same))
    assert a == b != c
    assert all(0 <= code < SPEECH_CODES for code in a + c)


async def test_cancel_mid_flight_leaves_within_a_step(
    source: TransformersTokenSource, alone: dict[GenerationParams, list[int]]
) -> None:
    doomed = source.generate(params(4, seed=5, max_tokens=5000))
    started = asyncio.Event()
    survivor = asyncio.create_task(first_then_rest(source.generate(MIX[0]), started))
    await started.wait()
    assert await anext(aiter(doomed))
    await asyncio.wait_for(doomed.aclose(), 1.0)  # returns once the thread has dropped the row
    assert doomed.finish_reason == "cancelled"
    assert (await survivor)[0] == alone[MIX[0]]


async def test_a_failing_row_fails_alone(
    source: TransformersTokenSource, alone: dict[GenerationParams, list[int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = engine_module.choose

    def flaky(logits: torch.Tensor, history: Any, settings: Any, counter: torch.Tensor) -> Any:
        doomed = (settings.seed_lo == 666) & (counter == 3)  # its fourth code: the logits go NaN
        logits[doomed] = float("nan")
        return real(logits, history, settings, counter)

    monkeypatch.setattr(engine_module, "choose", flaky)
    bad = source.generate(params(5, seed=666, max_tokens=20))
    results = await asyncio.gather(run(bad), *(run(source.generate(p)) for p in MIX), return_exceptions=True)
    assert isinstance(results[0], BackendError) and "not finite" in str(results[0])
    assert bad.finish_reason == "error"
    for p, result in zip(MIX, results[1:], strict=True):
        assert not isinstance(result, BaseException)
        assert result[0] == alone[p]


async def test_batch_size_and_cache_budget_bound_the_rows(
    tiny_lm_dir: Path, alone: dict[GenerationParams, list[int]]
) -> None:
    for kwargs, most in (({"batch_size": 2}, 2), ({}, 1)):
        lm = batched(tiny_lm_dir, **kwargs)
        await lm.start()
        engine = lm.engine
        assert engine is not None
        if not kwargs:  # a budget just short of the two smallest requests together
            reserved = [len(lm.tokenizer(p.prompt).input_ids) + p.max_tokens for p in MIX]
            engine.cache_budget = 2 * min(reserved) - 1
        try:
            results = await asyncio.gather(*(run(lm.generate(p)) for p in MIX))
        finally:
            await lm.close()
        assert [codes for codes, _ in results] == [alone[p] for p in MIX]  # the rest waited, none failed
        assert engine.peak_rows == most


async def test_a_request_larger_than_the_budget_runs_alone(tiny_lm_dir: Path) -> None:
    lm = batched(tiny_lm_dir, cache_tokens=1)
    await lm.start()
    try:
        codes, finish = await run(lm.generate(params(seed=1, max_tokens=4)))
    finally:
        await lm.close()
    assert (len(codes), finish) == (4, "length")


async def test_close_fails_running_and_waiting_requests(tiny_lm_dir: Path) -> None:
    lm = batched(tiny_lm_dir, batch_size=1)
    await lm.start()
    running = lm.generate(params(seed=1, max_tokens=5000))
    waiting = lm.generate(params(seed=2, max_tokens=5000))
    assert await anext(aiter(running))
    pending = asyncio.create_task(anext(aiter(waiting)))
    await asyncio.sleep(0.05)
    await asyncio.wait_for(lm.close(), 2.0)
    with pytest.raises(Unavailable):
        await run(running)
    with pytest.raises(Unavailable):
        await pending
    with pytest.raises(Unavailable):
        lm.generate(PARAMS)


def test_the_batched_engine_is_the_in_process_default(tiny_lm_dir: Path) -> None:
    default = build_source(make_settings(LM_BACKEND="transformers", TTS_MODEL=str(tiny_lm_dir)))
    assert isinstance(default, TransformersTokenSource)
    assert default._limits == {
        "max_rows": 8,
        "prefill_chunk": 256,
        "prefill_rows": None,
        "cache_budget": 32768,
    }
    single = build_source(
        make_settings(LM_BACKEND="transformers", TTS_MODEL=str(tiny_lm_dir), LM_MAX_BATCH=1)
    )
    assert isinstance(single, TransformersTokenSource) and single._limits["max_rows"] == 1
    two = build_source(
        make_settings(LM_BACKEND="transformers", TTS_MODEL=str(tiny_lm_dir), LM_PREFILL_ROWS=2)
    )
    assert isinstance(two, TransformersTokenSource) and two._limits["prefill_rows"] == 2
