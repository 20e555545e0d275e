"""The tiny LM's planted stop schedule: a generation without ``max_tokens`` ends by itself, with finish
reason "stop", after 2-5 s of codes, in both in-process engines and when the whole vocabulary is sampled
as vLLM samples it; for any prompt (plain, voice clone, history turns, about 1000 tokens long), greedy or
sampled. The plain random model (``stop_schedule=False``) runs to its cap instead."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch

from app.config import Settings
from app.families.neucodec.lm.transformers_source import TransformersTokenSource
from app.families.neucodec.lm.types import GenerationParams, TokenSource
from app.families.neucodec.prompt import history_prompt, tts_prompt, vc_prompt

pytestmark = pytest.mark.slow  # 20 generations of about 150 codes per engine

CODES_PER_S = 50
SHORTEST, LONGEST = 2 * CODES_PER_S, 5 * CODES_PER_S  # the schedule's promise: 2-5 s of codes
DEFAULTS = Settings.model_fields
CAP = DEFAULTS["DEFAULT_MAX_TOKENS"].default  # what a request without max_tokens gets
TEMPERATURE = DEFAULTS["DEFAULT_TEMPERATURE"].default
PENALTY = DEFAULTS["DEFAULT_REPETITION_PENALTY"].default


@dataclasses.dataclass(frozen=True)
class Turn:
    voice: str
    text: str
    codes: Sequence[int]


def prompt(i: int) -> str:
    """Request ``i``'s prompt: plain, voice clone, history turns or a long text, of varied lengths."""
    rng = random.Random(i)
    text = " ".join(
        rng.choice(["Hello", "there,", "a", "random", "model", "speaks."]) for _ in range(rng.randint(1, 40))
    )

    def codes(low: int, high: int) -> list[int]:
        return [rng.randrange(65536) for _ in range(rng.randint(low, high))]

    kind = i % 4
    if kind == 0:
        return tts_prompt("husein", text)
    if kind == 1:
        return vc_prompt("The words of the reference.", codes(20, 700), text)
    if kind == 2:
        turns = [Turn("idayu", "An earlier turn.", codes(10, 300)) for _ in range(rng.randint(1, 3))]
        return history_prompt(turns, "husein", text)
    return tts_prompt("husein", "word " * rng.randint(150, 200))  # 750-1000 tokens of text


def request(i: int) -> GenerationParams:
    """Request ``i``: the defaults of a request without sampling fields; greedy one time in three, at
    the API's highest temperature about one in five."""
    temperature = 0.0 if i % 3 == 0 else 2.0 if i % 5 == 4 else TEMPERATURE
    return GenerationParams(prompt(i), "tiny", CAP, temperature, PENALTY, seed=i)


REQUESTS = [request(i) for i in range(20)]


async def generate(source: TokenSource, params: GenerationParams) -> tuple[int, str | None]:
    stream = source.generate(params)
    count = 0
    async for codes in stream:
        count += len(codes)
    return count, stream.finish_reason


def assert_ended_by_the_schedule(results: list[tuple[int, str | None]]) -> None:
    assert all(reason == "stop" for _, reason in results), results
    counts = [count for count, _ in results]
    assert all(SHORTEST <= count <= LONGEST for count in counts), counts
    assert len(set(counts)) > 5, counts  # a spread between requests, not one fixed length


async def test_one_at_a_time_engine_stops_within_2_to_5_s(tiny_lm_dir: Path, one_torch_thread: None) -> None:
    source = TransformersTokenSource(str(tiny_lm_dir), device="cpu")
    await source.start()
    try:
        results = [await generate(source, params) for params in REQUESTS]
    finally:
        await source.close()
    assert_ended_by_the_schedule(results)


async def test_batched_engine_stops_within_2_to_5_s(tiny_lm_dir: Path, one_torch_thread: None) -> None:
    source = TransformersTokenSource(str(tiny_lm_dir), device="cpu", batch_size=8)
    await source.start()
    try:
        results = await asyncio.gather(*(generate(source, params) for params in REQUESTS))
    finally:
        await source.close()
    assert_ended_by_the_schedule(list(results))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
def test_full_vocabulary_sampling_stops_at_eos_within_2_to_5_s(
    tiny_lm_dir: Path, dtype: torch.dtype, one_torch_thread: None
) -> None:
    """As vLLM serves the checkpoint (its default dtype for a float32 one is float16): every id of the
    vocabulary may be sampled and generation_config's EOS ends it; transformers' ``generate`` works so."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_lm_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_dir, dtype=dtype).eval()
    eos = model.generation_config.eos_token_id
    first_speech = tokenizer.convert_tokens_to_ids("<|s_0|>")
    results = []
    for params in REQUESTS[::2]:
        ids = tokenizer(params.prompt, return_tensors="pt").input_ids
        sampling = {"do_sample": False}
        if params.temperature > 0:
            sampling = {"do_sample": True, "temperature": params.temperature, "top_k": 0, "top_p": 1.0}
        torch.manual_seed(params.seed or 0)
        with torch.inference_mode():
            out = model.generate(
                ids,
                max_new_tokens=CAP,
                repetition_penalty=params.repetition_penalty,
                pad_token_id=tokenizer.pad_token_id,
                **sampling,
            )
        generated = out[0, ids.shape[1] :].tolist()
        assert generated[-1] == eos, f"request {params.seed} ran to {len(generated)} tokens"
        assert all(token >= first_speech for token in generated[:-1])  # speech codes only, as in-process
        results.append((len(generated) - 1, "stop"))
    assert_ended_by_the_schedule(results)


async def test_without_the_schedule_a_generation_runs_to_its_cap(
    plain_lm_dir: Path, one_torch_thread: None
) -> None:
    source = TransformersTokenSource(str(plain_lm_dir), device="cpu")
    await source.start()
    try:
        for params in REQUESTS[:2]:  # greedy, and sampled
            count, reason = await generate(source, dataclasses.replace(params, max_tokens=2 * LONGEST))
            assert (count, reason) == (2 * LONGEST, "length")
    finally:
        await source.close()
