"""One decode step of the batched NeuCodec LM engine, split into forward, sampling and the rest, with the
previous per-row sampling and with the batched one, in one run; and the tiny fixture LM through the API.

    python -m bench.step_bench [--rows 1,8,32,64] [--steps 12] [--api-tokens 250] [--out step_cpu.json]

``steps``: a random Qwen3 of 4 layers, 1024 wide (``bench.lm_batch_bench``'s ``small`` shape) with the
speech head over the 65,537 allowed ids (65,536 codes and the stop id), float32 on the CPU. For each row
count, B prompts of about 40 tokens are prefilled into one batch, then the engine's own step
(``BatchedEngine._step``: inputs, mask and positions, the forward, ``sample`` and the hand-over of the
codes to an event loop) runs ``--steps`` times per way after three untimed ones, each step timed, its
forward and its sampling timed inside it; the rest is the step less both. The ways, at the server's
default sampling (temperature 0.6, repetition penalty 1.15, a seed per row):

- ``before``: the previous sampling, kept here as the baseline: per row, the penalty over a boolean
  history, softmax and ``torch.multinomial`` with the row's own ``torch.Generator``, and a hand-over of
  each row's code on its own;
- ``after``: the engine as it is (``app.lm.sampling.choose`` over the batch, one host read, one
  hand-over per step);
- ``bare``: no engine: the same forward and ``choose`` called in a loop on another prefilled batch, the
  floor an engine step can reach.

Each way has its own batch; the three take one step each in turn, so all see the same machine load.
Medians over the steps; per row = the step less its forward, over B.

``api``: a server (``python -m app``) with the tiny fixture LM in-process (``LM_BACKEND=transformers``,
``LM_MAX_BATCH=8``, the fixture without its planted stop, so each request makes ``--api-tokens`` codes)
and the tiny codec: one request alone (three times), then 8 at once (twice); tokens/s = codes (audio
seconds x 50) over the wall time.

Prints a table on stderr and JSON on stdout; ``--out`` writes it to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import torch

from app.families.neucodec.lm import engine as engine_module
from app.families.neucodec.lm.engine import Generation, SpeechTokenEngine, TokenRow
from app.families.neucodec.lm.loading import LoadedLM
from app.families.neucodec.lm.types import GenerationParams
from app.families.neucodec.prompt import tts_prompt
from app.families.neucodec.speech_tokens import SPEECH_CODES
from app.lm.padded_cache import PaddedBatch, PrefillGroup
from app.lm.sampling import choose
from bench.lm_batch_bench import TEXTS, _cpu, build_model
from bench.saving import save_report
from bench.server_speed_bench import Server, free_port, processes, wait_ready

WARMUP = 3  # untimed steps of each way before the timed ones


def old_choose(
    logits: torch.Tensor, seen: torch.Tensor, params: GenerationParams, gen: torch.Generator
) -> int:
    """The previous per-row sampling (penalty, temperature, softmax, ``torch.multinomial``); top-k and
    top-p are off at the defaults measured here."""
    if params.repetition_penalty != 1.0:
        penalized = torch.where(
            logits > 0, logits / params.repetition_penalty, logits * params.repetition_penalty
        )
        logits = torch.where(seen, penalized, logits)
    probs = torch.softmax(logits / params.temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=gen))


class OldSampling:
    """The previous ``sample`` of the engine: a loop over the rows, each with its own boolean history and
    generator, each code posted on its own."""

    def __init__(self, engine: SpeechTokenEngine, timer: Callable[[float], None]) -> None:
        self.engine = engine
        self.timer = timer
        self.state: dict[int, tuple[torch.Tensor, torch.Generator, list[int]]] = {}

    def _of(self, row: TokenRow) -> tuple[torch.Tensor, torch.Generator, list[int]]:
        if id(row) not in self.state:
            seen = torch.zeros(len(self.engine.lm.allowed_ids), dtype=torch.bool)
            seen[row.history[row.history >= 0]] = True
            gen = torch.Generator().manual_seed(row.params.seed or 0)
            self.state[id(row)] = (seen, gen, [row.last])
        return self.state[id(row)]

    def step_inputs(self, rows: list[TokenRow]) -> torch.Tensor:
        return torch.tensor([[self._of(row)[2][0]] for row in rows])

    def sample(self, rows: list[TokenRow], out: torch.Tensor) -> list[TokenRow]:
        started = time.perf_counter()
        picks = []
        for i, row in enumerate(rows):
            seen, gen, _ = self._of(row)
            picks.append(old_choose(out[i], seen, row.params, gen))
        self.timer(time.perf_counter() - started)
        for row, index in zip(rows, picks, strict=True):
            seen, _, last = self._of(row)
            if index < SPEECH_CODES:
                seen[index] = True
                row.handoff.post([index])
                last[0] = int(self.engine.lm.allowed_ids[index])
        return []


def prefilled(engine: SpeechTokenEngine, rows: int, loop: asyncio.AbstractEventLoop) -> PaddedBatch[TokenRow]:
    """``rows`` generations prepared and prefilled together into one batch (their first codes made)."""
    prepared = [
        engine.prepare(
            GenerationParams(
                prompt=tts_prompt("husein", TEXTS[i % len(TEXTS)]),
                model="bench",
                max_tokens=100000,
                temperature=0.6,
                repetition_penalty=1.15,
                seed=i,
            ),
            Generation(loop),
        )
        for i in range(rows)
    ]
    group: PrefillGroup[TokenRow] = PrefillGroup()
    group.form(deque(prepared), rows, engine.prompt)
    batch: PaddedBatch[TokenRow] = PaddedBatch()
    while group.rows:
        engine._prefill_step(group, batch)
    return batch


class Way:
    """One way of stepping a batch, its step, forward and sampling times (s) kept apart."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.totals: list[float] = []
        self.forwards: list[float] = []
        self.samplings: list[float] = []

    def step(self) -> None:
        raise NotImplementedError

    def timed(self, keep: bool) -> None:
        """One step, its times kept when ``keep``."""
        counts = len(self.forwards), len(self.samplings)
        started = time.perf_counter()
        self.step()
        total = time.perf_counter() - started
        if keep:
            self.totals.append(total)
        else:
            del self.forwards[counts[0] :], self.samplings[counts[1] :]

    def result(self) -> dict[str, float]:
        return split(self.totals, self.forwards, self.samplings, self.rows)


class EngineWay(Way):
    """The engine's own step (``BatchedEngine._step``) on its own prefilled batch; ``old`` with the
    previous sampling."""

    def __init__(self, loaded: LoadedLM, rows: int, old: bool, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(rows)
        self.engine = SpeechTokenEngine(
            loaded, "bench", max_rows=rows, cache_budget=10**9, prefill_chunk=4096
        )
        real_forward = self.engine.forward

        def forward(*args: Any) -> Any:
            started = time.perf_counter()
            out = real_forward(*args)
            self.forwards.append(time.perf_counter() - started)
            return out

        self.engine.forward = forward  # type: ignore[method-assign]  # timed
        if old:
            baseline = OldSampling(self.engine, self.samplings.append)
            self.engine.sample = baseline.sample  # type: ignore[method-assign]  # the previous path
            self.engine.step_inputs = baseline.step_inputs  # type: ignore[method-assign]
        self.batch = prefilled(self.engine, rows, loop)
        self.forwards.clear()  # the prefill's
        self.samplings.clear()

    def step(self) -> None:
        global CHOOSE_TIMES
        CHOOSE_TIMES = self.samplings
        self.engine._step(self.batch)


class BareWay(Way):
    """The same forward and ``choose`` in a plain loop (no engine)."""

    def __init__(self, loaded: LoadedLM, rows: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(rows)
        engine = SpeechTokenEngine(loaded, "bench", max_rows=rows, cache_budget=10**9, prefill_chunk=4096)
        self.lm = loaded
        batch = prefilled(engine, rows, loop)
        self.state = engine.stacked(batch.rows)
        self.inputs = self.state.last[:, None]
        self.positions = torch.tensor([[row.length] for row in batch.rows])
        self.cache = batch.cache
        width = batch.width
        self.mask = torch.ones((rows, width + 1), dtype=torch.long)
        for i, row in enumerate(batch.rows):
            self.mask[i, : width - row.length] = 0
        self.counter = self.state.generated

    def step(self) -> None:
        started = time.perf_counter()
        out, self.cache = self.lm.logits(
            input_ids=self.inputs,
            attention_mask=self.mask,
            position_ids=self.positions,
            past_key_values=self.cache,
        )
        forwarded = time.perf_counter()
        codes, _ = choose(out, self.state.history[:, : self.state.width], self.state.settings, self.counter)
        self.samplings.append(time.perf_counter() - forwarded)
        self.forwards.append(forwarded - started)
        self.counter = self.counter + 1
        self.inputs = self.lm.allowed_ids[codes][:, None]
        self.positions = self.positions + 1
        self.mask = torch.cat([self.mask, torch.ones((self.rows, 1), dtype=torch.long)], dim=1)


CHOOSE_TIMES: list[float] = []  # where the engine's timed ``choose`` puts its times


def timed_choose(*args: Any) -> Any:
    started = time.perf_counter()
    out = choose(*args)
    CHOOSE_TIMES.append(time.perf_counter() - started)
    return out


def measure(loaded: LoadedLM, rows: int, steps: int) -> dict[str, dict[str, float]]:
    """The three ways at ``rows`` rows, one step of each in turn (so all see the same machine load)."""
    loop = asyncio.new_event_loop()  # not running: the hand-overs queue there, as on a busy loop
    engine_module.choose = timed_choose  # type: ignore[assignment]  # timed
    try:
        ways: dict[str, Way] = {
            "before": EngineWay(loaded, rows, True, loop),
            "after": EngineWay(loaded, rows, False, loop),
            "bare": BareWay(loaded, rows, loop),
        }
        for step in range(-WARMUP, steps):
            for way in ways.values():
                way.timed(keep=step >= 0)
        return {name: way.result() for name, way in ways.items()}
    finally:
        engine_module.choose = choose  # type: ignore[assignment]
        loop.close()


def split(totals: list[float], forwards: list[float], samplings: list[float], rows: int) -> dict[str, float]:
    """Medians (ms) of the steps, their forwards and samplings, and of each step's rest and part beyond
    its forward (per row)."""
    assert len(totals) == len(forwards) == len(samplings)

    def median(values: list[float]) -> float:
        return round(1000 * statistics.median(values), 2)

    beyond = [t - f for t, f in zip(totals, forwards, strict=True)]
    return {
        "step_ms": median(totals),
        "forward_ms": median(forwards),
        "sampling_ms": median(samplings),
        "rest_ms": median([b - s for b, s in zip(beyond, samplings, strict=True)]),
        "beyond_forward_per_row_ms": round(1000 * statistics.median(beyond) / rows, 3),
    }


def steps_part(args: argparse.Namespace) -> dict[str, Any]:
    loaded: LoadedLM = build_model("small", torch.float32, torch.device("cpu"))
    report: dict[str, Any] = {}
    with torch.inference_mode():
        for rows in [int(n) for n in args.rows.split(",")]:
            ways = measure(loaded, rows, args.steps)
            after, bare = ways["after"], ways["bare"]
            report[str(rows)] = ways | {
                "after_over_bare": round(after["step_ms"] / bare["step_ms"], 3),
                # the engine's step against its own forward plus the bare loop's sampling (the forward's
                # noise between two batches left out)
                "after_over_forward_and_bare_sampling": round(
                    after["step_ms"] / (after["forward_ms"] + bare["sampling_ms"]), 3
                ),
            }
            print(f"rows {rows}: {json.dumps(report[str(rows)])}", file=sys.stderr, flush=True)
    return report


async def timed_requests(url: str, count: int, tokens: int, salt: int) -> tuple[float, float]:
    """``count`` requests at once: their codes (audio s x 50) and the wall seconds."""
    body = {"input": "Hello there, how are you?", "voice": "idayu", "response_format": "pcm"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:

        async def one(i: int) -> int:
            request = body | {"max_tokens": tokens, "seed": salt + i}
            async with session.post(url + "/v1/audio/speech", json=request) as response:
                assert response.status == 200, await response.text()
                return len(await response.read())

        started = time.perf_counter()
        sizes = await asyncio.gather(*(one(i) for i in range(count)))
        wall = time.perf_counter() - started
    return sum(sizes) / 2 / 24000 * 50, wall


async def api_part(args: argparse.Namespace) -> dict[str, Any]:
    import os
    import subprocess

    from app.families.neucodec.fixtures.codec import write_codec_checkpoint
    from app.families.neucodec.fixtures.lm import write_tiny_lm

    work = Path(tempfile.mkdtemp(prefix="step_bench_"))
    lm_dir = write_tiny_lm(work / "lm", seed=0, stop_schedule=False)
    codec_dir = write_codec_checkpoint(work / "codec")
    port = free_port()
    env = os.environ | {
        "LM_BACKEND": "transformers",
        "TTS_MODEL": str(lm_dir),
        "CODEC_MODEL": str(codec_dir),
        "DEVICE": "cpu",
        "LM_MAX_BATCH": "8",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "LOG_LEVEL": "warning",
        "INTERLEAVE_STORE": "memory",
        "VOICES_DIR": str(work / "voices"),
    }
    log = work / "server.log"
    with processes() as started, log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "app"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
        started.append(process)
        server = Server("api", f"http://127.0.0.1:{port}", process, log)
        await wait_ready(server)
        await timed_requests(server.url, 2, 20, 900)  # warm-up
        alone = [await timed_requests(server.url, 1, args.api_tokens, 10 * i) for i in range(3)]
        together = [await timed_requests(server.url, 8, args.api_tokens, 100 * i) for i in range(2)]
    one = statistics.median(codes / wall for codes, wall in alone)
    eight = statistics.median(codes / wall for codes, wall in together)
    report = {
        "tokens_per_request": args.api_tokens,
        "one_request_tokens_per_s": round(one, 1),
        "eight_requests_tokens_per_s": round(eight, 1),
        "ratio": round(eight / one, 2),
    }
    print(f"api: {json.dumps(report)}", file=sys.stderr, flush=True)
    return report


def table(steps: dict[str, Any]) -> str:
    lines = [
        "rows | way    | step ms | forward | sampling | rest  | beyond forward per row",
        "---- | ------ | ------- | ------- | -------- | ----- | ----------------------",
    ]
    for rows, ways in steps.items():
        for way in ("before", "after", "bare"):
            w = ways[way]
            lines.append(
                f"{rows:>4} | {way:<6} | {w['step_ms']:7.2f} | {w['forward_ms']:7.2f} "
                f"| {w['sampling_ms']:8.2f} | {w['rest_ms']:5.2f} | {w['beyond_forward_per_row_ms']:.3f} ms"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", default="1,8,32,64")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--api-tokens", type=int, default=250, help="codes per API request (0: skip the API)")
    parser.add_argument("--out", default="", help="also write the JSON to bench/results/OUT")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"cpu": _cpu(), "torch": torch.__version__, "threads": torch.get_num_threads()}
    report["steps"] = steps_part(args)
    print(table(report["steps"]), file=sys.stderr)
    if args.api_tokens:
        report["api"] = asyncio.run(api_part(args))
    print(json.dumps(report, indent=2))
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
