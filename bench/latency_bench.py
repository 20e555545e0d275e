"""First audio, listener stalls, refusals and throughput: the previous defaults against the new ones.

    python -m bench.latency_bench [--codec-dir DIR] [--rounds 2] [--rates 50,100,200] \
        [--streams 1,8,16] [--tokens 250] [--device cpu] [--instant-streams 8] [--out F.json]

One fake vLLM (``tests.fakes.fake_vllm --control``: each stream's tokens on a fixed timeline at the
rate asked; ``tokens_per_word`` set so that a request of a few words makes exactly ``--tokens`` codes,
spoken as one generation: a longer text would be cut into parts, each starting again from a first
window; checked before the run) and two servers (``python -m app``) on the official-size random NeuCodec
decoder, both loaded for the whole run:

- ``previous``: the earlier stitcher and admission defaults (``PREVIOUS_ENV``): a first window of 2 s
  growing x2 to 10 s, the buckets without 20, no deadline cuts, no first window sized to the codec,
  no batching on a CPU, no viability check;
- ``new``: the server's defaults (0.2 s first window growing x6, or longer to cover a slow codec's
  decode, deadline cuts, short windows batched on a CPU, viability admission, the loudness stage's
  first gain after 0.1 s), with whatever else is set in the environment.

Each round, for each LM rate and stream count, both servers in turn (so both see the same load) get a
burst of N concurrent streamed pcm requests of ``--tokens`` speech tokens each. Per request: the time to
the first audio byte, and the total stall of a simulated listener that starts playing at the first byte
and plays in real time (the time its buffer is empty before the last byte); a 429 is a refusal. Then
an instant LM (every token in one event): ``--instant-streams`` closed-loop streams of 2 requests (a
refused one sent again after its ``Retry-After``), audio seconds per wall second, and what that loop
cost each server (``/metrics`` before and after: the share of the time the codec decoded, decode windows
per request and per batch, the viability check's outcomes, the median first audio). Reported per server
and cell: first audio p50/p95, the worst stream's total stall, the streams that stalled, refusals
(medians over rounds); prints JSON and a table; ``--out`` writes the JSON under ``bench/results/``.
Run it alone on
the machine: it is a CPU benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from app.audio.playback import Playback
from bench.bench import percentile, speech_url
from bench.saving import save_report
from bench.server_speed_bench import (
    Server,
    free_port,
    machine,
    processes,
    run_on_codec,
    wait_ready,
    words_text,
)

CODES_PER_WORD = 25
"""The fake LM's codes per word of the bench's texts: a request of ``--tokens`` codes (250) is a text of
a few words (10), short enough for the server's estimate to keep it one generation."""

PREVIOUS_ENV = {
    "DEFAULT_PLAYBACK_SPEED": "2.0",
    "STREAM_CHUNK_GROWTH": "2.0",
    "STREAM_MAX_CHUNK_S": "10",
    "STREAM_PAST_CONTEXT_S": "0.3",
    "CODEC_BUCKETS": "64,96,128,192,256,384,512,768,1024",
    "STREAM_DEADLINE_CUTS": "false",
    "STREAM_FIRST_COVER": "0",
    "CODEC_CPU_BATCH_CODES": "1",  # no batching on a CPU (an accelerator batches either way)
    "VIABILITY_CHECK": "false",
    "CODEC_PREPACK": "false",
}
BYTES_PER_SAMPLE = 2


@dataclass
class Result:
    """One request: refused (429) or served, first audio (s from sending), audio s, total stall (s)."""

    status: int
    first_audio_s: float = 0.0
    audio_s: float = 0.0
    stall_s: float = 0.0
    retry_after: str | None = None


async def speak(session: aiohttp.ClientSession, url: str, text: str, tokens: int) -> Result:
    """One streamed pcm request, listened to by a real-time player from its first byte."""
    body = {"model": "tts-1", "input": text, "voice": "alloy", "response_format": "pcm", "stream": True}
    body["max_tokens"] = tokens
    started = time.perf_counter()
    first: float | None = None
    received = 0
    async with session.post(speech_url(url), json=body) as response:
        if response.status != 200:
            await response.read()
            return Result(response.status, retry_after=response.headers.get("Retry-After"))
        rate = int(response.headers.get("X-Audio-Sample-Rate", 24000))
        listener = Playback(rate)  # the server's own simulated listener, fed what the client received
        async for chunk in response.content.iter_any():
            now = time.perf_counter()
            if first is None:
                first = now
            samples = (received + len(chunk)) // BYTES_PER_SAMPLE - received // BYTES_PER_SAMPLE
            listener.emit(samples, now)
            received += len(chunk)
    if first is None:
        return Result(599)
    return Result(200, first - started, received / BYTES_PER_SAMPLE / rate, listener.stall_s)


def words_for(tokens: int) -> int:
    """Words of a request's text: at ``CODES_PER_WORD`` (or more) codes a word, the fake makes ``tokens``."""
    return max(1, math.ceil(tokens / CODES_PER_WORD))


def codes_per_word(tokens: int) -> int:
    """What the fake LM is told to make per word, so that ``words_for(tokens)`` words reach ``tokens``."""
    return math.ceil(tokens / words_for(tokens))


def request_text(tokens: int, salt: int) -> str:
    """A text of ``words_for(tokens)`` words."""
    return words_text(words_for(tokens), salt)


async def burst(url: str, streams: int, tokens: int, salt: int) -> list[Result]:
    """``streams`` requests sent at once."""
    timeout = aiohttp.ClientTimeout(total=600)
    connector = aiohttp.TCPConnector(limit=streams)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        return list(
            await asyncio.gather(
                *(speak(session, url, request_text(tokens, salt + i), tokens) for i in range(streams))
            )
        )


async def check_one_generation(url: str, tokens: int) -> None:
    """A request is ``tokens`` codes of audio, not more (a text cut into parts makes more): else exit."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        result = await speak(session, url, request_text(tokens, 0), tokens)
    if result.status != 200 or abs(result.audio_s - tokens / 50) > 0.5 / 50:
        raise SystemExit(
            f"a request of {tokens} codes gave {result.audio_s:.3f} s of audio (status {result.status}), "
            f"not {tokens / 50:.3f} s: its text is not spoken as one generation"
        )


@dataclass
class Loop:
    """A closed loop's outcome: audio seconds, wall seconds, and each served request's first audio (s from
    its last sending; a refused request's wait for its ``Retry-After`` not counted)."""

    audio_s: float
    wall_s: float
    first_audio_s: list[float]

    @property
    def audio_s_per_s(self) -> float:
        return self.audio_s / self.wall_s


async def closed_loop(url: str, streams: int, per_stream: int, tokens: int, salt: int) -> Loop:
    """``streams`` streams speaking ``per_stream`` requests each, one after the other."""
    timeout = aiohttp.ClientTimeout(total=600)
    firsts: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=streams), timeout=timeout) as s:

        async def stream(index: int) -> float:
            audio = 0.0
            for i in range(per_stream):
                while True:  # a refused request is sent again after its Retry-After, as clients do
                    text = request_text(tokens, salt + index * 10 + i)
                    result = await speak(s, url, text, tokens)
                    if result.status != 429:
                        break
                    await asyncio.sleep(float(result.retry_after or 1))
                audio += result.audio_s
                firsts.append(result.first_audio_s)
            return audio

        started = time.perf_counter()
        audio = sum(await asyncio.gather(*(stream(i) for i in range(streams))))
        return Loop(audio, time.perf_counter() - started, firsts)


WORK_SAMPLES = {
    ("tts_codec_compute_seconds_sum", "decode"): "decode_s",
    ("tts_codec_compute_seconds_count", "decode"): "batches",
    ("tts_codec_batch_size_sum", "decode"): "windows",
    ("tts_viability_streams_total", "admitted"): "admitted",
    ("tts_viability_streams_total", "waited"): "waited",
    ("tts_viability_streams_total", "refused"): "refused",
}
"""The server's counters a closed loop's work is read from (``/metrics``), by sample name and label."""


async def server_work(url: str) -> dict[str, float]:
    """The counters of ``WORK_SAMPLES`` of the server at ``url`` now."""
    async with aiohttp.ClientSession() as session, session.get(f"{url}/metrics") as response:
        return work_from_text(await response.text())


def work_from_text(text: str) -> dict[str, float]:
    """The counters of ``WORK_SAMPLES`` in a Prometheus exposition (0 for one not exported yet)."""
    got = dict.fromkeys(WORK_SAMPLES.values(), 0.0)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            label = sample.labels.get("queue") or sample.labels.get("outcome")
            name = WORK_SAMPLES.get((sample.name, label or ""))
            if name is not None:
                got[name] = sample.value
    return got


def loop_work(before: dict[str, float], after: dict[str, float], loop: Loop) -> dict[str, float]:
    """What a closed loop cost the server: the share of its wall time the codec decoded, decode windows
    per request and per batch, requests admitted at once, after a wait, refused (viability check), and
    the served requests' median first audio."""
    d = {key: after[key] - before[key] for key in after}
    requests = len(loop.first_audio_s)
    return {
        "decode_busy": round(d["decode_s"] / loop.wall_s, 3),
        "windows_per_request": round(d["windows"] / requests, 2) if requests else math.nan,
        "windows_per_batch": round(d["windows"] / d["batches"], 2) if d["batches"] else math.nan,
        "admitted": d["admitted"],
        "waited": d["waited"],
        "refused": d["refused"],
        "first_audio_s_p50": round(float(np.median(loop.first_audio_s)), 3) if requests else math.nan,
    }


async def set_pace(lm_url: str, tokens_per_s: float, per_event: int, per_word: int | None = None) -> None:
    async with aiohttp.ClientSession() as session:
        body: dict[str, float] = {"tokens_per_s": tokens_per_s, "tokens_per_event": per_event}
        if per_word is not None:
            body["tokens_per_word"] = per_word
        async with session.put(lm_url + "/fake/script", json=body) as response:
            response.raise_for_status()


def cell(results: list[list[Result]]) -> dict[str, Any]:
    """One (server, rate, streams) cell over rounds: medians of each round's figures."""

    def per_round(figure: Any) -> float | None:
        values = [figure(r) for r in results]
        values = [v for v in values if v is not None]
        return round(float(np.median(values)), 4) if values else None

    def served(r: list[Result]) -> list[Result]:
        return [x for x in r if x.status == 200]

    return {
        "first_audio_s_p50": per_round(lambda r: percentile([x.first_audio_s for x in served(r)], 50)),
        "first_audio_s_p95": per_round(lambda r: percentile([x.first_audio_s for x in served(r)], 95)),
        "worst_stall_s": per_round(lambda r: max((x.stall_s for x in served(r)), default=None)),
        "stalled_streams": per_round(lambda r: sum(1 for x in served(r) if x.stall_s > 0.001)),
        "refused": per_round(lambda r: sum(1 for x in r if x.status == 429)),
        "failed": per_round(lambda r: sum(1 for x in r if x.status not in (200, 429))),
        "retry_after": sorted({x.retry_after for r in results for x in r if x.retry_after}),
        "by_round_first_audio_p50": [percentile([x.first_audio_s for x in served(r)], 50) for r in results],
        "by_round_worst_stall_s": [max((x.stall_s for x in served(r)), default=None) for r in results],
    }


async def run(args: argparse.Namespace, codec_dir: Path, logs: Path) -> dict[str, Any]:
    base_env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    rates = [float(r) for r in args.rates.split(",")]
    counts = [int(n) for n in args.streams.split(",")]
    with processes() as started:
        lm_port = free_port()
        lm_url = f"http://127.0.0.1:{lm_port}"
        fake = [sys.executable, "-m", "tests.fakes.fake_vllm", "--port", str(lm_port), "--control"]
        started.append(subprocess.Popen(fake, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        servers = []
        for name, extra in (("previous", PREVIOUS_ENV), ("new", {})):
            port = free_port()
            env = base_env | {
                "LM_BACKEND": "http",
                "TTS_API": lm_url,
                "CODEC_MODEL": str(codec_dir),
                "DEVICE": args.device,
                "REFERENCE_VOICES": "false",
                "HOST": "127.0.0.1",
                "PORT": str(port),
                "LOG_LEVEL": "warning",
                "INTERLEAVE_STORE": "memory",
                "MAX_CONCURRENT_STREAMS": "64",
                **extra,
            }
            log = logs / f"{name}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    [sys.executable, "-m", "app"], env=env, stdout=out, stderr=subprocess.STDOUT
                )
            started.append(process)
            servers.append(Server(name, f"http://127.0.0.1:{port}", process, log))
        for server in servers:
            await wait_ready(server)
        await set_pace(lm_url, 0, 100_000, codes_per_word(args.tokens))
        for server in servers:  # warm-up: loads, and the codec rate the viability check reads
            await closed_loop(server.url, 2, 1, args.tokens, salt=999)
            await check_one_generation(server.url, args.tokens)
        raw: dict[str, dict[str, list[list[Result]]]] = {s.name: {} for s in servers}
        throughput: dict[str, list[float]] = {s.name: [] for s in servers}
        work: dict[str, list[dict[str, float]]] = {s.name: [] for s in servers}
        for round_ in range(args.rounds):
            for rate in rates:
                await set_pace(lm_url, rate, 1)
                for n in counts:
                    for server in servers if round_ % 2 == 0 else servers[::-1]:
                        results = await burst(server.url, n, args.tokens, salt=round_ * 1000 + n)
                        raw[server.name].setdefault(f"{rate:g}x{n}", []).append(results)
                        served = [r for r in results if r.status == 200]
                        print(
                            f"round {round_ + 1} {server.name:<8} {rate:g} tok/s x{n}: first audio p50 "
                            f"{percentile([r.first_audio_s for r in served], 50) or 0:.3f} s, worst stall "
                            f"{max((r.stall_s for r in served), default=0):.3f} s, "
                            f"refused {sum(1 for r in results if r.status == 429)}",
                            file=sys.stderr,
                        )
                        await asyncio.sleep(0.5)  # the last connections close
            await set_pace(lm_url, 0, 100_000)
            for server in servers:
                n = args.instant_streams
                before = await server_work(server.url)
                loop = await closed_loop(server.url, n, 2, args.tokens, round_)
                throughput[server.name].append(loop.audio_s_per_s)
                work[server.name].append(loop_work(before, await server_work(server.url), loop))
                print(
                    f"round {round_ + 1} {server.name:<8} instant LM x{n}: "
                    f"{loop.audio_s_per_s:.2f} audio s/s, "
                    + ", ".join(f"{key} {value:g}" for key, value in work[server.name][-1].items()),
                    file=sys.stderr,
                )
    rows: dict[str, Any] = {}
    for name, cells in raw.items():
        rows[name] = {key: cell(value) for key, value in cells.items()}
        rows[name]["instant_audio_s_per_s"] = round(float(np.median(throughput[name])), 3)
        rows[name]["instant_by_round"] = [round(t, 3) for t in throughput[name]]
        rows[name]["instant_work_by_round"] = work[name]
    return rows


def table(rows: dict[str, Any], rates: list[str], counts: list[str]) -> str:
    head = f"{'LM tok/s x streams':<20}" + "".join(
        f"{name + ' ' + what:>16}" for name in ("previous", "new") for what in ("p50", "stall", "429")
    )
    lines = [head, "-" * len(head)]
    for rate in rates:
        for n in counts:
            key = f"{float(rate):g}x{n}"
            line = f"{key:<20}"
            for name in ("previous", "new"):
                c = rows[name][key]
                line += f"{c['first_audio_s_p50'] or 0:>15.3f}s{c['worst_stall_s'] or 0:>15.3f}s"
                line += f"{c['refused'] or 0:>16g}"
            lines.append(line)
    lines.append(
        f"{'instant LM':<20}{rows['previous']['instant_audio_s_per_s']:>15.2f} audio s/s"
        f"{rows['new']['instant_audio_s_per_s']:>38.2f} audio s/s"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--codec-dir", type=Path, help="official-size codec checkpoint (default: write one)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rates", default="50,100,200", help="LM tokens per second per stream (CSV)")
    parser.add_argument("--streams", default="1,8,16", help="concurrent streams (CSV)")
    parser.add_argument("--tokens", type=int, default=250, help="speech tokens per request")
    parser.add_argument("--device", default="cpu", help="DEVICE of both servers (cuda on a GPU host)")
    parser.add_argument("--instant-streams", type=int, default=8, help="streams of the instant-LM run")
    parser.add_argument("--out", help="file name for the JSON under bench/results/")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = run_on_codec(args, run)
    report = {
        "bench": "latency",
        **machine(args.codec_dir),
        "lm": "fake vLLM, one token per event on a fixed timeline per stream; instant: all in one event",
        "previous_env": PREVIOUS_ENV,
        "rounds": args.rounds,
        "tokens": args.tokens,
        "device": args.device,
        "instant_streams": args.instant_streams,
        "elapsed_s": round(time.perf_counter() - started, 1),
        "results": rows,
    }
    print(json.dumps(report))
    print(table(rows, args.rates.split(","), args.streams.split(",")), file=sys.stderr)
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
