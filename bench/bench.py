"""Closed-loop load benchmark for any OpenAI-compatible ``/v1/audio/speech`` endpoint.

    python -m bench.bench --url http://localhost:9091 [--voice alloy] [--model tts-1] [--levels 1,4,16,50]
    python -m bench.bench --compare A.json B.json

At each concurrency level C, C workers send requests back to back (each waits for its previous
response to end) until the level has sent max(24, 4 x C) requests (``--requests`` overrides). The
sentences come from ``bench/evalset.py`` in order. Requests ask for streamed raw PCM
(``response_format=pcm``), so the time to the first body byte is the time to the first audio (a WAV
stream would send its header first and make TTFB meaningless). ``--warmup`` requests run before the
first level and are not counted.

Per level: requests/s and audio seconds per wall second (over the level's wall time), latency and TTFB
p50/p95/p99/max, RTF (latency / audio seconds) p50/p90, the p99 gap between body chunks, and errors
by kind: ``http_<status>``, ``timeout``, ``connection`` (refused, reset, or a cut chunked body) and
``short_body`` (a 200 whose audio is shorter than ``--min-audio-s`` or not whole 16-bit samples).
Percentiles use numpy's default ``linear`` method (Hyndman & Fan type 7) over the successful requests.

Prints a table on stderr and writes the JSON report to ``--out`` (a bare file name goes to
``bench/results/``; default ``load_<UTC time>.json``). ``--compare`` prints two reports side by side
with the ratio B/A per level.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from bench.evalset import EVALSET

RESULTS_DIR = Path(__file__).resolve().parent / "results"
PERCENTILE_METHOD = "numpy linear (Hyndman & Fan type 7)"
SAMPLE_RATE = 24000  # the pcm rate when the server sends no X-Audio-Sample-Rate header
BYTES_PER_SAMPLE = 2


@dataclass(frozen=True)
class BenchConfig:
    """What to send and how hard."""

    url: str
    voices: tuple[str, ...] = ("alloy",)
    model: str = "tts-1"
    levels: tuple[int, ...] = (1, 4, 16, 50)
    requests: int | None = None  # per level; None = max(24, 4 x concurrency)
    warmup: int = 4
    max_tokens: int = 1024
    temperature: float = 0.6
    timeout_s: float = 120.0
    min_audio_s: float = 0.02
    extra: dict[str, Any] = field(default_factory=dict)  # more body fields, e.g. playback_speed

    def requests_for(self, concurrency: int) -> int:
        """Requests sent at ``concurrency``."""
        return self.requests if self.requests is not None else max(24, 4 * concurrency)


@dataclass
class RequestResult:
    """One request as the client saw it; times in seconds from sending it."""

    ok: bool
    latency_s: float
    ttfb_s: float | None = None
    audio_s: float = 0.0
    gaps_s: list[float] = field(default_factory=list)  # between consecutive body chunks
    error: str | None = None  # http_<status> | timeout | connection | short_body
    detail: str = ""


def speech_url(url: str) -> str:
    """The speech endpoint: ``/v1/audio/speech`` after a base URL, ``/audio/speech`` after ``.../v1``."""
    url = url.rstrip("/")
    if url.endswith("/audio/speech"):
        return url
    return url + ("/audio/speech" if url.endswith("/v1") else "/v1/audio/speech")


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by numpy's linear method; None for no values."""
    if not values:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q, method="linear"))


def _rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


async def send_one(
    session: aiohttp.ClientSession, config: BenchConfig, text: str, voice: str
) -> RequestResult:
    """Send one streaming pcm request and time it."""
    body = {
        "model": config.model,
        "input": text,
        "voice": voice,
        "response_format": "pcm",
        "stream": True,
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
    } | config.extra
    started = time.perf_counter()
    ttfb: float | None = None
    last: float | None = None
    gaps: list[float] = []
    received = 0
    try:
        async with session.post(
            speech_url(config.url), json=body, timeout=aiohttp.ClientTimeout(total=config.timeout_s)
        ) as response:
            if response.status != 200:
                detail = (await response.text())[:200]
                return RequestResult(
                    False, time.perf_counter() - started, error=f"http_{response.status}", detail=detail
                )
            rate = int(response.headers.get("X-Audio-Sample-Rate", SAMPLE_RATE))
            async for chunk in response.content.iter_any():
                if not chunk:
                    continue
                now = time.perf_counter()
                if ttfb is None:
                    ttfb = now - started
                else:
                    assert last is not None
                    gaps.append(now - last)
                last = now
                received += len(chunk)
    except TimeoutError as exc:
        return RequestResult(False, time.perf_counter() - started, ttfb, error="timeout", detail=repr(exc))
    except aiohttp.ClientError as exc:
        return RequestResult(False, time.perf_counter() - started, ttfb, error="connection", detail=repr(exc))
    latency = time.perf_counter() - started
    audio_s = received / BYTES_PER_SAMPLE / rate
    if received % BYTES_PER_SAMPLE or audio_s < config.min_audio_s:
        return RequestResult(False, latency, ttfb, audio_s, error="short_body", detail=f"{received} bytes")
    return RequestResult(True, latency, ttfb, audio_s, gaps)


async def run_level(
    config: BenchConfig, concurrency: int, n_requests: int, offset: int = 0
) -> tuple[list[RequestResult], float]:
    """``concurrency`` closed-loop workers sending ``n_requests`` in all; the results and wall seconds.

    Request ``i`` speaks ``EVALSET[(offset + i) % 16]`` with ``voices[(offset + i) % len(voices)]``.
    """
    counter = itertools.count()
    results: list[RequestResult] = []
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            while (i := next(counter)) < n_requests:
                sentence = EVALSET[(offset + i) % len(EVALSET)]
                voice = config.voices[(offset + i) % len(config.voices)]
                results.append(await send_one(session, config, sentence.text, voice))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(min(concurrency, n_requests))))
        wall = time.perf_counter() - started
    return results, wall


def summarize(concurrency: int, results: list[RequestResult], wall_s: float) -> dict[str, Any]:
    """The level's row: throughput, percentiles over successful requests, errors by kind."""
    ok = [r for r in results if r.ok]
    errors: dict[str, int] = {}
    for r in results:
        if r.error is not None:
            errors[r.error] = errors.get(r.error, 0) + 1
    latency = [r.latency_s for r in ok]
    ttfb = [r.ttfb_s for r in ok if r.ttfb_s is not None]
    rtf = [r.latency_s / r.audio_s for r in ok if r.audio_s > 0]
    gaps = [gap for r in ok for gap in r.gaps_s]
    audio_s = sum(r.audio_s for r in ok)

    def stats(values: list[float], qs: tuple[int, ...] = (50, 95, 99)) -> dict[str, float | None]:
        row = {f"p{q}": _rounded(percentile(values, q)) for q in qs}
        row["max"] = _rounded(max(values)) if values else None
        return row

    return {
        "concurrency": concurrency,
        "requests": len(results),
        "ok": len(ok),
        "errors": len(results) - len(ok),
        "errors_by_kind": dict(sorted(errors.items())),
        "wall_s": round(wall_s, 3),
        "requests_per_s": round(len(ok) / wall_s, 3) if wall_s > 0 else None,
        "audio_s": round(audio_s, 3),
        "audio_s_per_s": round(audio_s / wall_s, 3) if wall_s > 0 else None,
        "latency_s": stats(latency),
        "ttfb_s": stats(ttfb),
        "rtf": {f"p{q}": _rounded(percentile(rtf, q)) for q in (50, 90)},
        "chunk_gap_s": {"p99": _rounded(percentile(gaps, 99)), "max": _rounded(max(gaps) if gaps else None)},
        "error_examples": sorted({f"{r.error}: {r.detail}" for r in results if r.error})[:3],
    }


def machine() -> dict[str, Any]:
    """Where the client ran (the server may be elsewhere)."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "nproc": os.cpu_count(), "platform": platform.platform()}


async def run_bench(
    config: BenchConfig, label: str = "", log: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Warm up, run every level in turn and return the report (also what ``--out`` writes)."""
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    if config.warmup:
        results, _ = await run_level(config, min(config.warmup, 4), config.warmup)
        failed = sum(not r.ok for r in results)
        log(f"warmup: {config.warmup} request(s), {failed} failed")
    rows = []
    offset = 0
    for concurrency in config.levels:
        n_requests = config.requests_for(concurrency)
        results, wall = await run_level(config, concurrency, n_requests, offset)
        offset += n_requests
        rows.append(summarize(concurrency, results, wall))
        row = rows[-1]
        log(
            f"  c={concurrency}: {row['ok']}/{row['requests']} ok, {row['audio_s_per_s']} audio s/s, "
            f"ttfb p50 {row['ttfb_s']['p50']} s"
        )
    return {
        "bench": "load",
        "label": label,
        "url": speech_url(config.url),
        "model": config.model,
        "voices": list(config.voices),
        "levels": list(config.levels),
        "requests_per_level": [config.requests_for(c) for c in config.levels],
        "warmup": config.warmup,
        "max_tokens": config.max_tokens,
        "temperature": config.temperature,
        "timeout_s": config.timeout_s,
        "extra": config.extra,
        "response_format": "pcm",
        "stream": True,
        "evalset": f"bench.evalset: {len(EVALSET)} sentences",
        "percentile_method": PERCENTILE_METHOD,
        "client": machine(),
        "started_at": started_at,
        "results": rows,
    }


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(report: dict[str, Any]) -> str:
    """The report's levels as a fixed-width table (seconds; RTF = latency / audio)."""
    head = (
        f"{'conc':>4} {'req':>4} {'err':>4} {'req/s':>6} {'audio s/s':>9} "
        f"{'lat p50/p95/p99/max':>23} {'ttfb p50/p95/p99/max':>23} {'rtf p50/p90':>11} {'gap p99':>7}"
    )
    lines = [head]
    for row in report["results"]:
        lat, ttfb, rtf = row["latency_s"], row["ttfb_s"], row["rtf"]
        lat_text = "/".join(_fmt(lat[k]) for k in ("p50", "p95", "p99", "max"))
        ttfb_text = "/".join(_fmt(ttfb[k]) for k in ("p50", "p95", "p99", "max"))
        lines.append(
            f"{row['concurrency']:>4} {row['requests']:>4} {row['errors']:>4} "
            f"{_fmt(row['requests_per_s']):>6} {_fmt(row['audio_s_per_s']):>9} {lat_text:>23} "
            f"{ttfb_text:>23} {_fmt(rtf['p50']) + '/' + _fmt(rtf['p90']):>11} "
            f"{_fmt(row['chunk_gap_s']['p99'], 3):>7}"
        )
        if row["errors"]:
            kinds = ", ".join(f"{kind} x{count}" for kind, count in row["errors_by_kind"].items())
            lines.append(f"     errors: {kinds}")
    return "\n".join(lines)


COMPARED = (
    ("requests/s", ("requests_per_s",)),
    ("audio s/s", ("audio_s_per_s",)),
    ("latency p50", ("latency_s", "p50")),
    ("latency p99", ("latency_s", "p99")),
    ("ttfb p50", ("ttfb_s", "p50")),
    ("ttfb p99", ("ttfb_s", "p99")),
    ("rtf p50", ("rtf", "p50")),
    ("gap p99", ("chunk_gap_s", "p99")),
    ("errors", ("errors",)),
)


def _lookup(row: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = row
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def compare(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Two reports side by side: each metric at each concurrency both have, with the ratio B/A."""
    rows_a = {row["concurrency"]: row for row in a["results"]}
    rows_b = {row["concurrency"]: row for row in b["results"]}
    lines = [
        f"A: {a.get('label') or a.get('url')} ({a.get('started_at')})",
        f"B: {b.get('label') or b.get('url')} ({b.get('started_at')})",
        f"{'conc':>4} {'metric':<12} {'A':>10} {'B':>10} {'B/A':>7}",
    ]
    for concurrency in sorted(rows_a.keys() & rows_b.keys()):
        for name, path in COMPARED:
            va, vb = _lookup(rows_a[concurrency], path), _lookup(rows_b[concurrency], path)
            ratio = f"{vb / va:.2f}x" if va and vb is not None else "-"
            lines.append(f"{concurrency:>4} {name:<12} {_fmt(va, 3):>10} {_fmt(vb, 3):>10} {ratio:>7}")
    missing = sorted(rows_a.keys() ^ rows_b.keys())
    if missing:
        lines.append(f"levels in only one report: {missing}")
    return "\n".join(lines)


def output_path(out: str) -> Path:
    """A bare file name lands in ``bench/results/``; a path with a directory is used as given."""
    path = Path(out)
    return RESULTS_DIR / path if path.parent == Path(".") else path


def _ints(text: str) -> tuple[int, ...]:
    values = tuple(int(item) for item in text.split(",") if item.strip())
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError("expected positive integers separated by commas")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://localhost:9091", help="base URL or the speech endpoint")
    parser.add_argument("--voice", default="alloy", help="a voice, or several separated by commas (rotated)")
    parser.add_argument("--model", default="tts-1")
    parser.add_argument("--levels", type=_ints, default=(1, 4, 16, 50), help="concurrency levels")
    parser.add_argument("--requests", type=int, help="requests per level (default max(24, 4 x level))")
    parser.add_argument("--warmup", type=int, default=4, help="uncounted requests before the first level")
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    parser.add_argument("--min-audio-s", type=float, default=0.02, help="shorter 200 bodies are errors")
    parser.add_argument("--extra", type=json.loads, default={}, help="more body fields, as a JSON object")
    parser.add_argument("--label", default="", help="what was measured (machine, model, settings)")
    parser.add_argument("--out", help="report file (bare name: bench/results/NAME)")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="print two reports side by side")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or the comparison); exit status 1 when any counted request failed."""
    args = parse_args(argv)
    if args.compare:
        a, b = (json.loads(output_path(p).read_text(encoding="utf-8")) for p in args.compare)
        print(compare(a, b))
        return 0
    config = BenchConfig(
        url=args.url,
        voices=tuple(v.strip() for v in args.voice.split(",") if v.strip()),
        model=args.model,
        levels=args.levels,
        requests=args.requests,
        warmup=args.warmup,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        timeout_s=args.timeout,
        min_audio_s=args.min_audio_s,
        extra=args.extra,
    )
    report = asyncio.run(run_bench(config, args.label))
    path = output_path(args.out or f"load_{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(report))
    print(f"wrote {path}", file=sys.stderr)
    return 1 if any(row["errors"] for row in report["results"]) else 0


if __name__ == "__main__":
    sys.exit(main())
