"""Per-request cost of the hot-path spans: gate closed vs open, in microseconds.

    python -m bench.tracing_overhead [--requests 300] [--codes 600] [--out NAME.json]

One request's worth of span work runs through the real code: ``tts.normalize`` (+ ``normalize.rule``),
then ``synthesize`` (the stitcher, ``tts.chunk`` -> ``codec.decode`` per window) wrapped by
``traced_stream`` (``tts.stream``), fed by a token source that opens ``lm.generate`` / ``lm.connect`` /
``lm.first_token`` like the HTTP source, and a decode that records the four batcher stages after the
fact (``record_span``) like the codec batcher. Nothing is computed: the decode returns zeros at once, so
the time is the pipeline's own bookkeeping plus the spans.

Modes: ``off`` (the gate closed: shared no-ops), ``no_processor`` (spans built and dropped: what the
gate prevents), ``console`` (SimpleSpanProcessor + ConsoleSpanExporter writing to /dev/null, which
serializes every span) and ``batch`` (BatchSpanProcessor + in-memory exporter, the production
shape). Reports the median and p90 per request, the overhead over ``off`` and the ratio; prints JSON
and a table; ``--out`` also writes the JSON to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import numpy as np
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanProcessor,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.audio.stitcher import StitchSchedule
from app.config import Settings
from app.core.types import FinishReason
from app.families.neucodec.lm.types import GenerationParams
from app.families.neucodec.pipeline import UtteranceStats, synthesize
from app.observability.tracing import (
    Tracing,
    current_context,
    record_span,
    span,
    start_span,
    traced_stream,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
DELTA = 8  # codes per LM event, as vLLM streams them
BATCH_STAGES = ("codec.batch_wait", "codec.batch_prep", "codec.compute_wait", "codec.gpu_decode")


class FakeStream:
    """An LM stream that yields ``codes`` codes in deltas, with the HTTP source's spans."""

    finish_reason: FinishReason | None = None
    prompt_tokens: int | None = None

    def __init__(self, codes: int) -> None:
        self._deltas = self._run(codes)

    def __aiter__(self) -> AsyncIterator[list[int]]:
        return self._deltas

    async def _run(self, codes: int) -> AsyncIterator[list[int]]:
        generation = start_span("lm.generate", {"lm.url": "http://bench"})
        with span("lm.connect", parent=generation.context):
            pass
        first = start_span("lm.first_token", parent=generation.context)
        first.end()
        try:
            for start in range(0, codes, DELTA):
                yield list(range(start, min(codes, start + DELTA)))
            self.finish_reason = "stop"
        finally:
            generation.set({"lm.deltas": -(-codes // DELTA), "lm.finish_reason": self.finish_reason})
            generation.end()

    async def aclose(self) -> None:
        await self._deltas.aclose()


class FakeSource:
    name = "bench"

    def __init__(self, codes: int) -> None:
        self.codes = codes

    def generate(self, params: GenerationParams) -> FakeStream:
        return FakeStream(self.codes)


async def decode(codes: list[int], deadline: float | None = None) -> np.ndarray:
    """Zeros at once, with the four batcher stages recorded after the fact under the caller's span."""
    parent = current_context()
    if parent is not None:
        now = time.time_ns()
        for index, name in enumerate(BATCH_STAGES):
            record_span(
                name, parent, now + index, now + index + 1, {"batch.size": 1, "codec.cuda_graph": False}
            )
    return np.zeros(len(codes) * 480, dtype=np.float32)


async def one_request(source: FakeSource, schedule: StitchSchedule, params: GenerationParams) -> None:
    with span("POST /v1/audio/speech"):
        with span("tts.normalize", {"normalizer.mode": "rule"}), span("normalize.rule"):
            pass
        stats = UtteranceStats()
        handle = start_span("tts.stream", {"response_format": "pcm"})
        async for _ in traced_stream(
            handle, synthesize(source, decode, params, schedule, stats), stats.span_attributes
        ):
            pass


def traced_settings() -> Tracing:
    """An open gate with no exporter (processors are attached by the caller)."""
    return Tracing.from_settings(Settings(_env_file=None, TRACING_SPANS_REQUIRE_EXPORTER=False))


def mode_context(mode: str) -> tuple[AbstractContextManager[object], Callable[[], None]]:
    """The tracing context for ``mode`` and its shutdown."""
    if mode == "off":
        return nullcontext(), lambda: None
    traced = traced_settings()
    assert traced.provider is not None
    processor: SpanProcessor | None = None
    if mode == "console":
        devnull = open(os.devnull, "w")  # noqa: SIM115  (closed by the provider's shutdown below)
        processor = SimpleSpanProcessor(ConsoleSpanExporter(out=devnull))
    elif mode == "batch":
        processor = BatchSpanProcessor(InMemorySpanExporter(), max_queue_size=1 << 16)
    if processor is not None:
        traced.provider.add_span_processor(processor)
    return traced.activated(), traced.shutdown


async def run_mode(mode: str, requests: int, codes: int) -> list[float]:
    source = FakeSource(codes)
    schedule = StitchSchedule.from_seconds(2.0, 0.2, 2.0, 10.0, 3.0, 12.0)
    params = GenerationParams(
        prompt="x", model="bench", max_tokens=codes, temperature=0.6, repetition_penalty=1.0
    )
    context, shutdown = mode_context(mode)
    times: list[float] = []
    with context:
        for _ in range(requests // 10):  # warm up
            await one_request(source, schedule, params)
        for _ in range(requests):
            started = time.perf_counter_ns()
            await one_request(source, schedule, params)
            times.append((time.perf_counter_ns() - started) / 1000)
    shutdown()
    return times


def spans_per_request(codes: int) -> int:
    traced = traced_settings()
    assert traced.provider is not None
    exporter = InMemorySpanExporter()
    traced.provider.add_span_processor(SimpleSpanProcessor(exporter))
    schedule = StitchSchedule.from_seconds(2.0, 0.2, 2.0, 10.0, 3.0, 12.0)
    params = GenerationParams(
        prompt="x", model="bench", max_tokens=codes, temperature=0.6, repetition_penalty=1.0
    )
    with traced.activated():
        asyncio.run(one_request(FakeSource(codes), schedule, params))
    traced.shutdown()
    return len(exporter.get_finished_spans())


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_us": round(statistics.median(ordered), 1),
        "p90_us": round(ordered[int(0.9 * (len(ordered) - 1))], 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--codes", type=int, default=600, help="speech tokens per request (50 a second)")
    parser.add_argument("--out", help="file name for the JSON under bench/results/")
    args = parser.parse_args(argv)
    modes = {
        mode: summary(asyncio.run(run_mode(mode, args.requests, args.codes)))
        for mode in ("off", "no_processor", "console", "batch")
    }
    off = modes["off"]["median_us"]
    for values in modes.values():
        values["overhead_us"] = round(values["median_us"] - off, 1)
        values["ratio"] = round(values["median_us"] / off, 2)
    result = {
        "bench": "tracing_overhead",
        "requests": args.requests,
        "codes_per_request": args.codes,
        "spans_per_request": spans_per_request(args.codes),
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "modes": modes,
    }
    print(json.dumps(result, indent=2))
    print(f"\n{'mode':<14}{'median µs':>12}{'p90 µs':>12}{'overhead µs':>14}{'ratio':>8}")
    for name, values in modes.items():
        print(
            f"{name:<14}{values['median_us']:>12}{values['p90_us']:>12}{values['overhead_us']:>14}{values['ratio']:>8}"
        )
    if args.out:
        RESULTS_DIR.mkdir(exist_ok=True)
        (RESULTS_DIR / args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
