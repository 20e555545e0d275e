"""Old codec defaults against new ones, through the real server, in one run.

    python -m bench.server_speed_bench [--codec-dir DIR] [--rounds 3] [--streams 8] [--out F.json]

Starts a fake vLLM that sends every speech token of an utterance in one event (an instant LM, so the
codec is all that is measured) and two servers (``python -m app``) on the official-size random NeuCodec
decoder, both loaded for the whole run:

- ``old``: the previous defaults: ``CODEC_DTYPE=float32``, ``CODEC_SCHEDULING=fifo`` (first come,
  first served), ``CODEC_BATCHING=on`` (windows of equal length batched, 2 ms window, up to 16, bucketed
  decode lengths), ``STREAM_PAST_CONTEXT_S=3``, ``CROSSFADE_MS=12``, ``STREAM_REDECODE_BUDGET=0``;
- ``new``: the server's defaults (``CODEC_DTYPE=auto``, deadline scheduling, ``CODEC_BATCHING=auto``,
  0.3 s past context, 100 ms crossfades, a 0.2 re-decode budget), with whatever else is set in the
  environment.

Code shared by both (the stitcher sending each window's audio as soon as it is decoded, the one-thread
batcher) is the new code; ``old`` differs by its settings only.

Each round, for each server in turn (so both see the same machine load): ``single``: one stream speaks
utterances of 3, 5, 3 and 5 s one after another (its first audio depends on the first window
only); ``concurrent``: ``--streams`` closed-loop
streams speak ``--requests-per-stream`` utterances each, lengths cycling through 3, 5, 10, 20 s. Per
request: the time to the first audio byte and, playing from that byte on in real time, the longest
time the listener went without audio (a chunk arriving later than the audio before it had lasted).
Reported per server: single-stream first audio (median), throughput at N streams (audio seconds per
wall second, median over rounds), first audio at N streams (median and p95 over all requests), and
stalls; then new/old ratios. Prints JSON and a table; ``--out`` writes the JSON to ``bench/results/``.
Run it alone on the machine: it is a CPU benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from bench.bench import percentile, speech_url
from bench.codec_bench import cpu_model
from bench.saving import save_report

OLD_ENV = {
    "CODEC_DTYPE": "float32",
    "CODEC_SCHEDULING": "fifo",
    "CODEC_BATCHING": "on",
    "STREAM_PAST_CONTEXT_S": "3.0",
    "CROSSFADE_MS": "12",
    "STREAM_REDECODE_BUDGET": "0",
}
SECONDS = (3, 5, 10, 20)
SINGLE_SECONDS = (3, 5, 3, 5)  # the single stream's first audio depends on the first window only
TOKENS_PER_WORD = 12  # the fake vLLM's codes per word of input
WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "seven", "bright")
BYTES_PER_SAMPLE = 2


def words_text(count: int, salt: int) -> str:
    """A sentence of ``count`` plain words (``salt`` picks where in ``WORDS`` it starts)."""
    return " ".join(WORDS[(salt + i) % len(WORDS)] for i in range(count)) + "."


def text_for(seconds: float, salt: int) -> str:
    """Plain words that make the fake LM speak about ``seconds`` of audio (50 codes per second)."""
    return words_text(max(1, round(seconds * 50 / TOKENS_PER_WORD)), salt)


@dataclass
class Result:
    """One request: first audio (s from sending), audio seconds, longest stall (s), ok."""

    ok: bool
    first_audio_s: float = 0.0
    audio_s: float = 0.0
    stall_s: float = 0.0
    detail: str = ""


async def speak(session: aiohttp.ClientSession, url: str, text: str) -> Result:
    """One streamed pcm request; the stall is how far a chunk came after the audio before it ran out."""
    body = {"model": "tts-1", "input": text, "voice": "alloy", "response_format": "pcm", "stream": True}
    body["max_tokens"] = 2048
    started = time.perf_counter()
    first: float | None = None
    received, stall = 0, 0.0
    async with session.post(speech_url(url), json=body) as response:
        if response.status != 200:
            return Result(False, detail=f"http_{response.status}: {(await response.text())[:200]}")
        rate = int(response.headers.get("X-Audio-Sample-Rate", 24000))
        async for chunk in response.content.iter_any():
            now = time.perf_counter()
            if first is None:
                first = now
            else:  # the listener started playing at `first`; what was received lasts until then
                stall = max(stall, (now - first) - received / BYTES_PER_SAMPLE / rate)
            received += len(chunk)
    if first is None:
        return Result(False, detail="no audio")
    return Result(True, first - started, received / BYTES_PER_SAMPLE / rate, stall)


async def scenario(
    url: str, streams: int, per_stream: int, salt: int, seconds: tuple[int, ...] = SECONDS
) -> tuple[list[Result], float]:
    """``streams`` closed-loop streams of ``per_stream`` utterances each, their lengths cycling through
    ``seconds``; the results and the wall seconds."""
    counter = itertools.count()
    results: list[Result] = []
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=streams), timeout=timeout) as s:

        async def stream() -> None:
            while (i := next(counter)) < streams * per_stream:
                results.append(await speak(s, url, text_for(seconds[i % len(seconds)], salt + i)))

        started = time.perf_counter()
        await asyncio.gather(*(stream() for _ in range(streams)))
        return results, time.perf_counter() - started


@dataclass
class Server:
    """One server process and what it measured."""

    name: str
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    ready: dict[str, Any] = field(default_factory=dict)
    single: list[Result] = field(default_factory=list)
    concurrent: list[Result] = field(default_factory=list)
    throughput: list[float] = field(default_factory=list)  # audio s per wall s, one per round


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes started inside are terminated (and waited for) on the way out."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for process in started:
            process.terminate()
        for process in started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


async def wait_ready(server: Server, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise RuntimeError(f"{server.name} server exited: {server.log.read_text()[-2000:]}")
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(server.url + "/ready") as response:
                    if response.status == 200:
                        server.ready = await response.json()
                        return
            await asyncio.sleep(0.5)
    raise RuntimeError(f"{server.name} server not ready in {timeout_s:g} s: {server.log.read_text()[-2000:]}")


def summary(server: Server) -> dict[str, Any]:
    single = [r for r in server.single if r.ok]
    conc = [r for r in server.concurrent if r.ok]
    every = server.single + server.concurrent
    return {
        "ready": server.ready,
        "single_first_audio_s_p50": percentile([r.first_audio_s for r in single], 50),
        "single_first_audio_s_by_round": [round(r.first_audio_s, 4) for r in single],
        "concurrent_audio_s_per_s_p50": float(np.median(server.throughput)) if server.throughput else None,
        "concurrent_audio_s_per_s_by_round": [round(t, 3) for t in server.throughput],
        "concurrent_first_audio_s_p50": percentile([r.first_audio_s for r in conc], 50),
        "concurrent_first_audio_s_p95": percentile([r.first_audio_s for r in conc], 95),
        "requests": len(every),
        "errors": [r.detail for r in every if not r.ok],
        "stalled_requests": sum(1 for r in every if r.ok and r.stall_s > 0),
        "longest_stall_s": max((r.stall_s for r in every if r.ok), default=0.0),
        "single_stalls_s": [round(r.stall_s, 3) for r in single if r.stall_s > 0],
        "concurrent_stalled_requests": sum(1 for r in conc if r.stall_s > 0),
    }


async def run(args: argparse.Namespace, codec_dir: Path, logs: Path) -> dict[str, Any]:
    base_env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with processes() as started:
        lm_port = free_port()
        fake = [sys.executable, "-m", "tests.fakes.fake_vllm", "--port", str(lm_port)]
        fake += ["--tokens-per-s", "0", "--tokens-per-event", "100000"]  # every token in one event
        started.append(subprocess.Popen(fake, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        servers = []
        for name, extra in (("old", OLD_ENV), ("new", {})):
            port = free_port()
            env = (
                base_env
                | {
                    "LM_BACKEND": "http",
                    "TTS_API": f"http://127.0.0.1:{lm_port}",
                    "CODEC_MODEL": str(codec_dir),
                    "DEVICE": "cpu",
                    "REFERENCE_VOICES": "false",
                    "HOST": "127.0.0.1",
                    "PORT": str(port),
                    "LOG_LEVEL": "warning",
                    "INTERLEAVE_STORE": "memory",
                    "MAX_CONCURRENT_STREAMS": "64",
                }
                | extra
            )
            log = logs / f"{name}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    [sys.executable, "-m", "app"], env=env, stdout=out, stderr=subprocess.STDOUT
                )
            started.append(process)
            servers.append(Server(name, f"http://127.0.0.1:{port}", process, log))
        for server in servers:
            await wait_ready(server)
            print(f"{server.name}: ready, codec {server.ready.get('codec')}", file=sys.stderr)
            await scenario(server.url, 2, 1, salt=999)  # warm-up
        for round_ in range(args.rounds):
            for server in servers:
                results, _ = await scenario(server.url, 1, len(SINGLE_SECONDS), round_ * 100, SINGLE_SECONDS)
                server.single += results
                results, wall = await scenario(
                    server.url, args.streams, args.requests_per_stream, round_ * 100
                )
                server.concurrent += results
                server.throughput.append(sum(r.audio_s for r in results if r.ok) / wall)
                print(
                    f"  round {round_ + 1} {server.name}: single first audio "
                    f"{np.median([r.first_audio_s for r in server.single[-len(SINGLE_SECONDS) :]]):.3f} s, "
                    f"{args.streams} streams {server.throughput[-1]:.2f} audio s/s, first audio p50 "
                    f"{np.median([r.first_audio_s for r in results]):.3f} s",
                    file=sys.stderr,
                )
            partial = {server.name: summary(server) for server in servers}  # survives a cut-off run
            print(f"after round {round_ + 1}: {json.dumps(partial)}", file=sys.stderr)
    rows = {server.name: summary(server) for server in servers}
    old, new = rows["old"], rows["new"]

    def ratio(key: str) -> float | None:
        return round(new[key] / old[key], 3) if new[key] and old[key] else None

    rows["new_vs_old"] = {
        "single_first_audio": ratio("single_first_audio_s_p50"),
        "concurrent_throughput": ratio("concurrent_audio_s_per_s_p50"),
        "concurrent_first_audio_p50": ratio("concurrent_first_audio_s_p50"),
        "concurrent_first_audio_p95": ratio("concurrent_first_audio_s_p95"),
    }
    return rows


def table(rows: dict[str, Any], streams: int) -> str:
    head = f"{'':<6}{'1-stream 1st audio':>20}{f'{streams}-stream audio s/s':>22}{'1st audio p50':>15}"
    head += f"{'p95':>8}{'stalls':>8}"
    lines = [head, "-" * len(head)]
    for name in ("old", "new"):
        r = rows[name]
        lines.append(
            f"{name:<6}{r['single_first_audio_s_p50']:>19.3f}s{r['concurrent_audio_s_per_s_p50']:>22.2f}"
            f"{r['concurrent_first_audio_s_p50']:>14.3f}s{r['concurrent_first_audio_s_p95']:>7.3f}s"
            f"{r['stalled_requests']:>8}"
        )
    x = rows["new_vs_old"]
    lines.append(
        f"{'new/old':<6}{x['single_first_audio']:>19.3f}x{x['concurrent_throughput']:>21.2f}x"
        f"{x['concurrent_first_audio_p50']:>14.3f}x{x['concurrent_first_audio_p95']:>7.3f}x"
    )
    return "\n".join(lines)


def run_on_codec(
    args: argparse.Namespace, run: Callable[[argparse.Namespace, Path, Path], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """``run(args, codec_dir, logs)`` on ``args.codec_dir`` or on an official-size random decoder written
    for the run, in a temporary directory that holds the servers' logs; SIGTERM (as `timeout` sends)
    exits so that the servers it started are stopped."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory() as tmp:
        codec_dir = args.codec_dir.resolve() if args.codec_dir is not None else None
        if codec_dir is None:
            subprocess.run(
                [sys.executable, "-m", "app.tools.fixtures", "--out", tmp, "--full-size-codec"], check=True
            )
            codec_dir = Path(tmp) / "codec"
        return asyncio.run(run(args, codec_dir, Path(tmp)))


def machine(codec_dir: Path | None) -> dict[str, Any]:
    """The report's head: the decoder and the machine it ran on."""
    return {
        "decoder": str(codec_dir) if codec_dir else "random official-size NeuCodec (written for the run)",
        "cpu": cpu_model(),
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--codec-dir", type=Path, help="official-size codec checkpoint (default: write one)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--requests-per-stream", type=int, default=2)
    parser.add_argument("--out", help="file name for the JSON under bench/results/")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = run_on_codec(args, run)
    report = {
        "bench": "server_speed",
        **machine(args.codec_dir),
        "lm": "fake vLLM, every token of an utterance in one event",
        "old_env": OLD_ENV,
        "utterance_s": SECONDS,
        "rounds": args.rounds,
        "streams": args.streams,
        "requests_per_stream": args.requests_per_stream,
        "elapsed_s": round(time.perf_counter() - started, 1),
        "results": rows,
    }
    print(json.dumps(report))
    print(table(rows, args.streams), file=sys.stderr)
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
