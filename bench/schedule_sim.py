"""The streaming schedule on a simulated clock: first audio, stalls, refusals and throughput of streams
that share one codec, each scenario in a fraction of a second and the same on every machine.

    python -m bench.schedule_sim [--fixed-ms 14 --per-code-ms 1.15 | --codec-dir DIR [--dtype bfloat16]]
        [--rates 50,100,200,0] [--streams 1,2,4,8,16] [--tokens 250] [--configs previous,current]
        [--out NAME.json]

Everything but the decoder and the LM is the server's own code: the NeuCodec family's schedule and the
codec load it sizes windows by (``NeuCodecFamily.schedule``, ``round_load``), the admission and its
viability check (``Admission``, ``NeuCodecFamily.admits``), ``pipeline.synthesize`` with the stitcher
and its deadline cuts. They run on an event loop whose clock jumps to the next timer whenever nothing is
ready (``looptime``), against:

- a modeled codec (``ModeledCodec``): one decode at a time, earliest play-out deadline first, windows of
  any lengths packed into one batch while it holds at most CODEC_CPU_BATCH_CODES codes and MAX_BATCH_SIZE
  windows and ends by its most urgent window's deadline (STREAM_FIRST_COVER to spare) unless the window
  joining is due by then (as the codec batcher does on a CPU), a batch of ``c`` codes taking
  ``fixed + per_code * c`` seconds. ``--codec-dir`` fits
  the two figures to decodes of that checkpoint on this machine (``fit_codec``); by default they are
  the ones measured for the full-size decoder in bfloat16 on 2 cores of an AMD EPYC with avx512_bf16;
- an LM that sends one speech token at a time on a fixed timeline at ``--rates`` tokens a second per
  stream (0: all of them in one event, an instant LM).

For each configuration (``--configs``: ``current`` is the server's defaults; ``previous`` the defaults
before the load-fitted schedule, as ``bench.latency_bench`` runs them), rate and stream count, the
streams ask for admission together (the viability check refuses what the codec could not keep fed) and
the admitted ones speak ``--tokens`` tokens each. Per scenario: first audio p50 and worst (from the
request to the first chunk), the worst stream's total stall (its listener starts at the first chunk and
plays in real time), the streams that stalled, refusals, audio seconds per second of the whole run,
the codec's busy share, and codes decoded per code emitted. Prints JSON and a table; ``--out`` writes
the JSON under ``bench/results/``. What it leaves out is everything that costs the real server CPU
beside the decoder (HTTP, the event loop, the post stages): ``bench.latency_bench`` measures the real
thing on real decodes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import looptime
import numpy as np

from app.api.admission import Admission, Viability
from app.audio.playback import Playback
from app.codec.deadlines import DeadlineQueue
from app.config import Settings
from app.core.constants import SAMPLES_PER_TOKEN, TOKENS_PER_SECOND
from app.core.errors import RateLimited
from app.core.stats import UtteranceStats
from app.families.neucodec.family import WARMUP_LENGTHS, NeuCodecFamily
from app.families.neucodec.lm.types import GenerationParams
from app.families.neucodec.pipeline import synthesize
from app.interleave.service import Interleave
from app.observability.metrics import Metrics
from bench.saving import save_report

FIXED_S = 0.014
PER_CODE_S = 0.00115
"""The full-size decoder in bfloat16, weights laid out once (CODEC_PREPACK), 2 cores of an AMD EPYC with
avx512_bf16: a batch of c codes takes about 14 ms + 1.15 ms * c."""
PREVIOUS = {
    "DEFAULT_PLAYBACK_SPEED": 2.0,
    "STREAM_CHUNK_GROWTH": 2.0,
    "STREAM_MAX_CHUNK_S": 10.0,
    "STREAM_PAST_CONTEXT_S": 0.3,
    "STREAM_DEADLINE_CUTS": False,
    "STREAM_FIRST_COVER": 0.0,
    "CODEC_CPU_BATCH_CODES": 1,
    "VIABILITY_CHECK": False,
}
"""The defaults before small first windows, deadline cuts, load-fitted windows and viability admission
(``bench.latency_bench``'s ``previous``)."""
CONFIGS: dict[str, dict[str, Any]] = {"previous": PREVIOUS, "current": {}}
BATCH_WINDOW_S = 0.002  # the codec batcher's BATCH_WINDOW_MS: how long an idle codec gathers a batch


@dataclass
class _Window:
    codes: int
    done: asyncio.Future[None]


class ModeledCodec:
    """One decode at a time, the batches chosen as the codec batcher chooses them on a CPU
    (``DeadlineQueue.take``): earliest deadline first, windows of any lengths packed into one batch, most
    urgent first, while it holds at most ``batch_codes`` codes and ``max_batch`` windows and, ``cover``
    times its cost, still ends by the first window's deadline unless the one joining is due by then (the
    first always goes); a batch of ``c`` codes takes ``fixed_s + per_code_s * c`` seconds; each batch is
    reported to ``metrics`` as the codec worker reports it."""

    def __init__(
        self,
        fixed_s: float,
        per_code_s: float,
        batch_codes: int,
        max_batch: int,
        cover: float,
        metrics: Metrics,
    ) -> None:
        self.fixed_s, self.per_code_s, self.cover = fixed_s, per_code_s, cover
        self.batch_codes, self.max_batch = batch_codes, max_batch
        self.metrics = metrics
        self.busy_s = 0.0
        self.decoded = 0  # codes
        self._queue: DeadlineQueue[_Window] = DeadlineQueue(
            key=lambda window: 0, weight=lambda window: window.codes
        )
        self._wake = asyncio.Event()

    async def decode(self, codes: list[int], deadline: float | None = None) -> np.ndarray:
        window = _Window(len(codes), asyncio.get_running_loop().create_future())
        self._queue.push(window, -math.inf if deadline is None else deadline)  # None: due now
        self._wake.set()
        await window.done
        return np.zeros(len(codes) * SAMPLES_PER_TOKEN, dtype=np.float32)

    def _ends(self, codes: int) -> float:
        """When a batch of ``codes`` codes started now would end, ``cover`` times its cost."""
        return asyncio.get_running_loop().time() + self.cover * (self.fixed_s + self.per_code_s * codes)

    async def run(self) -> None:
        """Serve the queue until cancelled."""
        while True:
            while not len(self._queue):
                self._wake.clear()
                await self._wake.wait()
            await asyncio.sleep(BATCH_WINDOW_S)
            ends = self._ends if self.cover > 0 else None
            batch = self._queue.take(self.max_batch, self.batch_codes, ends)
            await self.compute(sum(window.codes for window in batch))
            for window in batch:
                if not window.done.done():
                    window.done.set_result(None)

    async def compute(self, codes: int) -> None:
        """Spend the time ``codes`` codes take, and report it."""
        seconds = self.fixed_s + self.per_code_s * codes
        await asyncio.sleep(seconds)
        self.busy_s += seconds
        self.decoded += codes
        self.metrics.observe_decoded(codes / TOKENS_PER_SECOND, seconds)


class PacedStream:
    """``tokens`` speech tokens, one per ``1 / rate`` seconds from the start (all at once when 0)."""

    def __init__(self, tokens: int, rate: float) -> None:
        self.tokens, self.rate = tokens, rate
        self.finish_reason: str | None = None
        self.prompt_tokens: int | None = 0

    async def _deltas(self) -> AsyncIterator[list[int]]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        if not self.rate:
            yield list(range(self.tokens))
        for i in range(self.tokens if self.rate else 0):
            await asyncio.sleep(max(0.0, start + (i + 1) / self.rate - loop.time()))
            yield [i]
        self.finish_reason = "length"

    def __aiter__(self) -> AsyncIterator[list[int]]:
        return self._deltas()

    async def aclose(self) -> None:
        return None


class PacedSource:
    name = "paced"

    def __init__(self, tokens: int, rate: float) -> None:
        self.tokens, self.rate = tokens, rate

    def generate(self, params: GenerationParams) -> PacedStream:
        return PacedStream(self.tokens, self.rate)


@dataclass
class Outcome:
    """One request: refused, or served with its first audio (s from the request) and total stall (s)."""

    refused: bool
    first_audio_s: float = 0.0
    stall_s: float = 0.0
    audio_s: float = 0.0


async def speak(
    family: NeuCodecFamily, admission: Admission, codec: ModeledCodec, source: PacedSource
) -> Outcome:
    """One request as the server serves it: admission, the family's schedule and load, synthesize."""
    loop = asyncio.get_running_loop()
    asked = loop.time()
    try:
        started = await admission.acquire()
    except RateLimited:
        return Outcome(refused=True)
    try:
        s = family.settings
        schedule = family.schedule(s.DEFAULT_PLAYBACK_SPEED, s.DEFAULT_PLAYBACK_OVERLAP_SPEED)
        params = GenerationParams("", "", source.tokens, 1.0, 1.0)
        first: float | None = None
        listener = Playback(SAMPLES_PER_TOKEN * TOKENS_PER_SECOND)
        samples = 0
        chunks = synthesize(
            source, codec.decode, params, schedule, UtteranceStats(), clock=loop.time, load=family.round_load
        )
        async for chunk in chunks:
            now = loop.time()
            if first is None:
                first = now
            listener.emit(chunk.size, now)
            samples += chunk.size
        assert first is not None
        return Outcome(False, first - asked, listener.stall_s, samples / listener.sample_rate)
    finally:
        admission.release(started)


async def scenario(
    settings: Settings, fixed_s: float, per_code_s: float, rate: float, streams: int, tokens: int
) -> dict[str, Any]:
    """``streams`` requests at once at an LM ``rate``: the figures of the module docstring."""
    metrics = Metrics()
    family = NeuCodecFamily(settings, Interleave(settings, None), metrics)
    metrics.capacity.rules.append(family.admits)
    s = settings
    viability = Viability(s.VIABILITY_LM_FLOOR, s.VIABILITY_WAIT_S) if s.VIABILITY_CHECK else None
    clock = asyncio.get_running_loop().time  # the simulated clock
    admission = Admission(
        s.MAX_CONCURRENT_STREAMS, s.MAX_QUEUED_STREAMS, s.QUEUE_WAIT_S, metrics, viability, clock
    )
    batching = (settings.CODEC_CPU_BATCH_CODES, settings.MAX_BATCH_SIZE, settings.STREAM_FIRST_COVER)
    codec = ModeledCodec(fixed_s, per_code_s, *batching, metrics)
    server = asyncio.create_task(codec.run())
    for length in WARMUP_LENGTHS:  # the codec worker's startup decodes
        await codec.compute(length)
    codec.busy_s, codec.decoded = 0.0, 0
    started = asyncio.get_running_loop().time()
    source = PacedSource(tokens, rate)
    outcomes = await asyncio.gather(*(speak(family, admission, codec, source) for _ in range(streams)))
    wall = asyncio.get_running_loop().time() - started
    server.cancel()
    served = [o for o in outcomes if not o.refused]
    firsts = [o.first_audio_s for o in served]
    return {
        "first_audio_s_p50": round(statistics.median(firsts), 4),
        "first_audio_s_max": round(max(firsts), 4),
        "worst_stall_s": round(max(o.stall_s for o in served), 4),
        "stalled_streams": sum(1 for o in served if o.stall_s > 0.001),
        "refused": len(outcomes) - len(served),
        "audio_s_per_s": round(sum(o.audio_s for o in served) / wall, 3),
        "codec_busy": round(codec.busy_s / wall, 3),
        "decoded_per_emitted": round(codec.decoded / (tokens * len(served)), 3),
    }


def simulate(
    settings: Settings, fixed_s: float, per_code_s: float, rate: float, streams: int, tokens: int
) -> dict[str, Any]:
    """``scenario`` on a fresh simulated clock."""
    loop = looptime.new_event_loop(start=0.0)
    try:
        return loop.run_until_complete(scenario(settings, fixed_s, per_code_s, rate, streams, tokens))
    finally:
        loop.close()


def settings_for(config: dict[str, Any]) -> Settings:
    """The server's settings with ``config`` over the defaults (no .env file, no stores)."""
    base: dict[str, Any] = {"INTERLEAVE_STORE": "off", "REFERENCE_CACHE_SIZE": 0}
    return Settings(_env_file=None, **(base | config))  # type: ignore[call-arg]


def fit_codec(codec_dir: str, dtype: str, repeats: int = 3) -> tuple[float, float]:
    """``(fixed_s, per_code_s)`` of the NeuCodec decoder at ``codec_dir`` on this machine: the median time
    of decodes of 20 and 256 codes (one window each), as the server's codec runs it on a CPU."""
    import torch

    from app.codec.prepack import prepack_for_cpu
    from app.families.neucodec.codec.loading import load_decoder

    decoder = load_decoder(codec_dir, "cpu").cast(getattr(torch, dtype))
    prepack_for_cpu(decoder, "decoder")
    times = {}
    for length in (20, 256):
        codes = torch.randint(0, decoder.config.codebook_size, (1, length))
        decoder.decode(codes)
        runs = []
        for _ in range(repeats):
            started = time.perf_counter()
            decoder.decode(codes)
            runs.append(time.perf_counter() - started)
        times[length] = statistics.median(runs)
    per_code = (times[256] - times[20]) / (256 - 20)
    return max(0.0, times[20] - 20 * per_code), per_code


def table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    names = list(results)
    head = f"{'LM tok/s x streams':<20}" + "".join(
        f"{name[:8] + ' ' + what:>15}" for name in names for what in ("p50", "stall", "429", "a-s/s")
    )
    lines = [head, "-" * len(head)]
    for key in results[names[0]]:
        line = f"{key:<20}"
        for name in names:
            c = results[name][key]
            line += f"{c['first_audio_s_p50']:>14.3f}s{c['worst_stall_s']:>14.3f}s{c['refused']:>15}"
            line += f"{c['audio_s_per_s']:>15.2f}"
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fixed-ms", type=float, default=FIXED_S * 1000, help="a decode's fixed cost")
    parser.add_argument("--per-code-ms", type=float, default=PER_CODE_S * 1000, help="its cost per code")
    parser.add_argument("--codec-dir", help="fit both to this NeuCodec checkpoint's decodes on this CPU")
    parser.add_argument("--dtype", default="bfloat16", help="the decoder's dtype with --codec-dir")
    parser.add_argument("--rates", default="50,100,200,0", help="LM tokens/s per stream (0: instant)")
    parser.add_argument("--streams", default="1,2,4,8,16", help="requests at once (CSV)")
    parser.add_argument("--tokens", type=int, default=250, help="speech tokens per request")
    parser.add_argument("--configs", default="previous,current", help=f"of {sorted(CONFIGS)} (CSV)")
    parser.add_argument("--out", help="file name for the JSON under bench/results/")
    args = parser.parse_args(argv)
    fixed_s, per_code_s = args.fixed_ms / 1000, args.per_code_ms / 1000
    if args.codec_dir:
        fixed_s, per_code_s = fit_codec(args.codec_dir, args.dtype)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for name in args.configs.split(","):
        settings = settings_for(CONFIGS[name])
        results[name] = {
            f"{float(rate):g}x{n}": simulate(settings, fixed_s, per_code_s, float(rate), int(n), args.tokens)
            for rate in args.rates.split(",")
            for n in args.streams.split(",")
        }
    report = {
        "bench": "schedule_sim",
        "codec": {"fixed_s": round(fixed_s, 5), "per_code_s": round(per_code_s, 6), "fit": args.codec_dir},
        "tokens": args.tokens,
        "configs": {name: CONFIGS[name] for name in args.configs.split(",")},
        "results": results,
    }
    print(json.dumps(report))
    print(table(results), file=sys.stderr)
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
