"""TransformersTokenSource on the tiny random LM: sampling, finish reasons, cancellation, shutdown."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import pytest_asyncio
import torch

from app.core.errors import Unavailable
from app.families.neucodec.lm.transformers_source import TransformersTokenSource
from app.families.neucodec.lm.types import GenerationParams, TokenStream
from app.families.neucodec.speech_tokens import SPEECH_CODES

STOP = SPEECH_CODES  # index of <|im_end|> among the allowed ids: right after the 65,536 speech codes
PARAMS = GenerationParams(
    prompt="<|im_start|>jenny: Hello there!<|speech_start|>",
    model="tiny",
    max_tokens=12,
    temperature=1.0,
    repetition_penalty=1.0,
)


def params(**changes: object) -> GenerationParams:
    return dataclasses.replace(PARAMS, **changes)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def source(tiny_lm_dir: Path) -> AsyncIterator[TransformersTokenSource]:
    lm = TransformersTokenSource(str(tiny_lm_dir), device="cpu")
    await lm.start()
    yield lm
    await lm.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def endless(plain_lm_dir: Path) -> AsyncIterator[TransformersTokenSource]:
    """The LM without the planted stop, whose generations run until closed: the cancellation tests."""
    lm = TransformersTokenSource(str(plain_lm_dir), device="cpu")
    await lm.start()
    yield lm
    await lm.close()


async def run(stream: TokenStream) -> tuple[list[int], str | None]:
    codes: list[int] = []
    async for delta in stream:
        assert delta, "deltas are never empty"
        codes += delta
    return codes, stream.finish_reason


@contextmanager
def forced_logits(source: TransformersTokenSource, make: Callable[[int], dict[int, float]]) -> Iterator[None]:
    """Replace the speech head's logits at step ``n`` by -50 everywhere except ``make(n)``
    ({allowed index: logit}); the index after the speech codes is <|im_end|>."""
    lm = source._lm
    assert lm is not None
    step = 0

    def hook(_module: torch.nn.Module, _inputs: object, output: torch.Tensor) -> torch.Tensor:
        nonlocal step
        forced = torch.full_like(output, -50.0)
        for index, value in make(step).items():
            forced[..., index] = value
        step += 1
        return forced

    handle = lm.head.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


# --- generation ----------------------------------------------------------------------------------------


async def test_codes_in_range_and_max_tokens_gives_length(source: TransformersTokenSource) -> None:
    assert await source.ready()
    codes, finish = await run(source.generate(params(seed=1)))
    assert len(codes) == 12
    assert all(0 <= code < SPEECH_CODES for code in codes)
    assert finish == "length"


async def test_same_seed_same_codes(source: TransformersTokenSource) -> None:
    first = await run(source.generate(params(seed=7)))
    assert await run(source.generate(params(seed=7))) == first
    assert (await run(source.generate(params(seed=8))))[0] != first[0]


async def test_greedy_is_deterministic(source: TransformersTokenSource) -> None:
    greedy = params(temperature=0.0)
    assert await run(source.generate(greedy)) == await run(source.generate(greedy))


async def test_repetition_penalty_changes_the_choice(source: TransformersTokenSource) -> None:
    with forced_logits(source, lambda _step: {5: 10.0, 6: 8.0}):
        plain, _ = await run(source.generate(params(temperature=0.0, max_tokens=4)))
        penalized, _ = await run(
            source.generate(params(temperature=0.0, max_tokens=4, repetition_penalty=2.0))
        )
    assert plain == [5, 5, 5, 5]
    assert penalized == [5, 6, 5, 5]  # 10/2 < 8, then 8/2 < 10/2


async def test_stop_token_ends_with_stop(source: TransformersTokenSource) -> None:
    with forced_logits(source, lambda step: {STOP: 10.0} if step == 3 else {step: 10.0}):
        assert await run(source.generate(params(max_tokens=100))) == ([0, 1, 2], "stop")


async def test_prompt_tokens_are_the_tokenized_prompt_length(source: TransformersTokenSource) -> None:
    stream = source.generate(params(max_tokens=2))
    assert stream.prompt_tokens is None
    await run(stream)
    lm = source._lm
    assert lm is not None
    assert stream.prompt_tokens == len(lm.tokenizer(params().prompt).input_ids) > 0


async def test_aclose_stops_the_thread_within_a_step(endless: TransformersTokenSource) -> None:
    stream = endless.generate(params(max_tokens=100_000))
    assert len(await anext(stream)) >= 1
    await asyncio.wait_for(stream.aclose(), 1.0)
    assert stream.finish_reason == "cancelled"
    assert [delta async for delta in stream] == []
    started = time.monotonic()
    assert (await run(endless.generate(params(max_tokens=3))))[1] == "length"
    assert time.monotonic() - started < 2.0


async def test_cancelling_the_consumer_stops_the_generation(endless: TransformersTokenSource) -> None:
    stream = endless.generate(params(max_tokens=100_000))
    first = asyncio.Event()

    async def consume() -> None:
        async for _ in stream:
            first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The thread is free again within a step: a short request right after finishes quickly.
    next_request = endless.generate(params(max_tokens=3))
    assert (await asyncio.wait_for(run(next_request), 2.0))[1] == "length"


async def test_a_dropped_stream_stops_its_generation(endless: TransformersTokenSource) -> None:
    stream = endless.generate(params(max_tokens=100_000))
    assert await anext(stream)
    del stream
    gc.collect()
    next_request = endless.generate(params(max_tokens=3))
    assert (await asyncio.wait_for(run(next_request), 2.0))[1] == "length"


async def test_requests_take_turns(source: TransformersTokenSource) -> None:
    events: list[str] = []

    async def tracked(name: str) -> list[int]:
        codes: list[int] = []
        async for delta in source.generate(params(temperature=0.0, max_tokens=5)):
            events.append(name)
            codes += delta
        events.append(f"{name} done")
        return codes

    first, second = await asyncio.gather(tracked("a"), tracked("b"))
    assert first == second
    assert events.index("a done") < events.index("b")


async def test_stream_closed_before_iteration_never_runs(source: TransformersTokenSource) -> None:
    stream = source.generate(PARAMS)
    await stream.aclose()
    assert stream.finish_reason == "cancelled"
    assert [delta async for delta in stream] == []


async def test_the_tokenizer_counts_prompts_like_the_generation(source: TransformersTokenSource) -> None:
    assert source.tokenizer is not None
    stream = source.generate(params(max_tokens=1))
    await run(stream)
    assert stream.prompt_tokens == len(source.tokenizer(PARAMS.prompt).input_ids)


# --- lifecycle -----------------------------------------------------------------------------------------


def test_unknown_dtype_is_rejected() -> None:
    with pytest.raises(ValueError, match="dtype"):
        TransformersTokenSource("unused", device="cpu", dtype="float8")


async def test_not_started(tiny_lm_dir: Path) -> None:
    lm = TransformersTokenSource(str(tiny_lm_dir), device="cpu")
    assert not await lm.ready()
    assert lm.tokenizer is None
    with pytest.raises(Unavailable):
        lm.generate(PARAMS)


async def test_close_ends_the_running_generation_and_joins_the_thread(tiny_lm_dir: Path) -> None:
    lm = TransformersTokenSource(str(tiny_lm_dir), device="cpu", dtype="float32", name="closing")
    await lm.start()
    assert lm.engine is not None
    thread = lm.engine._thread
    assert thread is not None and thread.name == "closing-rows"
    running = lm.generate(params(max_tokens=100_000))
    assert await anext(running)
    queued = lm.generate(PARAMS)
    queued_task = asyncio.create_task(run(queued))
    await asyncio.sleep(0)  # let it join the queue
    await asyncio.wait_for(lm.close(), 2.0)
    assert not thread.is_alive()
    assert not await lm.ready()
    with pytest.raises(Unavailable):
        async for _ in running:
            pass
    with pytest.raises(Unavailable):
        await queued_task
    with pytest.raises(Unavailable):
        lm.generate(PARAMS)
