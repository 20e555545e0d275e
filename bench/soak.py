"""Memory soak of the streamed ``/v1/audio/speech`` endpoint on the demo stack (tiny codec + fake vLLM).

    python -m bench.soak [--requests 1000] [--concurrency 16] [--drop-fraction 0.3] [--out soak_cpu.json]
    python -m bench.soak --tracemalloc 8 ...   # diagnose: where the server's Python allocations grew

Starts the fake vLLM (``tests/fakes/fake_vllm.py``, random codes paced at ``--tokens-per-s`` per stream)
and the server (``python -m app``, ``LM_BACKEND=http``, the tiny codec of ``--codec-model``, made by
``python -m app.tools.fixtures --out .fixtures``) as subprocesses on free loopback ports, then sends
``--requests`` streamed requests from ``--concurrency`` closed-loop clients. Request ``i`` asks for
format ``FORMATS[i % 4]`` (pcm, wav, mp3, opus), as raw audio or as SSE events in turn
(``(i // 4) % 2``), with the sentences of ``bench/evalset.py`` and the voices alloy and nova in turn. A
seeded random ``--drop-fraction`` of the requests are dropped by their client: it closes the
connection as soon as the first audio bytes arrive (raw: the first body bytes; SSE: the first
``speech.audio.delta`` event).

The server's resident memory (VmRSS), open file descriptors (by kind: listening, client connections,
the keep-alive pool to the LM, pipes, ...) and threads are read from ``/proc/PID``: at two checkpoints,
after request ``--baseline-at`` (default 200) and after the last request, and every ``--sample-every``
completed requests (under load, for the trend only). Before a checkpoint the clients stop sending, the
in-flight requests end, the client session closes its connections and the server gets ``--settle-s``
seconds, so both checkpoints see the same idle state.

Targets: RSS growth from the baseline to the final checkpoint under ``--max-rss-growth-pct`` (3 %); file
descriptors other than the LM pool and threads not above their baseline; the LM pool (which fills once,
up to one connection per concurrent stream) within ``--concurrency``; no failed request. A request is
``ok`` when it gets a 200 and a whole, well-formed body (SSE: ``speech.audio.done`` then ``[DONE]``, no
error event), ``dropped`` when its client closed it after the first audio, ``failed`` otherwise (by
kind: ``http_<status>``, ``timeout``, ``connection``, ``bad_body``, ``sse_error``).

Bounded: at most ``--requests`` requests and ``--time-limit-s`` seconds of sending (past it no new request
starts and the report says so); each request has ``--request-timeout-s``. Both subprocesses are stopped
on any exit (a normal end, an error, Ctrl-C, SIGTERM; via ``setpriv --pdeathsig`` also when this process
is killed). Writes the JSON report to ``--out`` (a bare name goes to ``bench/results/``), prints it on
stdout and a summary table on stderr; exits 1 when a target is missed or a request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import aiohttp

from bench.bench import machine, output_path
from bench.evalset import EVALSET

ROOT = Path(__file__).resolve().parent.parent
FORMATS = ("pcm", "wav", "mp3", "opus")
Outcome = Literal["ok", "dropped", "failed"]


@dataclass(frozen=True)
class SoakConfig:
    """How many requests, how hard, which checkpoints and targets."""

    requests: int = 1000
    concurrency: int = 16
    drop_fraction: float = 0.3
    baseline_at: int = 200
    sample_every: int = 100
    settle_s: float = 2.0
    tokens_per_s: float = 100.0
    max_tokens: int = 1024
    voices: tuple[str, ...] = ("alloy", "nova")
    request_timeout_s: float = 60.0
    time_limit_s: float = 540.0
    seed: int = 0
    max_rss_growth_pct: float = 3.0
    codec_model: Path = ROOT / ".fixtures" / "codec"  # the tiny codec of `python -m app.tools.fixtures`
    tracemalloc_frames: int = 0  # > 0: trace the server's allocations, compare snapshots at checkpoints

    def __post_init__(self) -> None:
        if not 0 < self.baseline_at < self.requests:
            raise ValueError("baseline_at must be between 0 and requests (exclusive)")
        if not 0.0 <= self.drop_fraction <= 1.0:
            raise ValueError("drop_fraction must be within [0, 1]")
        if self.concurrency < 1 or self.sample_every < 1:
            raise ValueError("concurrency and sample_every must be positive")


@dataclass(frozen=True)
class PlannedRequest:
    """What request ``index`` sends and whether its client drops it after the first audio."""

    index: int
    text: str
    voice: str
    response_format: str
    sse: bool
    drop: bool


@dataclass(frozen=True)
class RequestOutcome:
    """How one request ended; ``error`` names the kind of a failure."""

    index: int
    outcome: Outcome
    error: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class ProcSample:
    """The server process after ``completed`` requests, ``elapsed_s`` into the soak."""

    completed: int
    elapsed_s: float
    rss_kib: int
    fds: int
    threads: int
    fd_kinds: dict[str, int]  # see read_fd_kinds
    checkpoint: bool  # taken with no request in flight and no client connection open (after settle_s)


def plan_requests(config: SoakConfig) -> list[PlannedRequest]:
    """The whole soak, request by request: formats and transports in turn, a seeded set of drops."""
    n_drop = round(config.requests * config.drop_fraction)
    drops = set(random.Random(config.seed).sample(range(config.requests), n_drop))
    return [
        PlannedRequest(
            index=i,
            text=EVALSET[i % len(EVALSET)].text,
            voice=config.voices[i % len(config.voices)],
            response_format=FORMATS[i % len(FORMATS)],
            sse=(i // len(FORMATS)) % 2 == 1,
            drop=i in drops,
        )
        for i in range(config.requests)
    ]


def read_proc(pid: int) -> tuple[int, int]:
    """(VmRSS in KiB, threads) of process ``pid``, from ``/proc/PID/status``."""
    fields: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["Threads"])


TCP_LISTEN, TCP_CLOSE_WAIT = "0A", "08"  # the `st` column of /proc/net/tcp (include/net/tcp_states.h)


def read_fd_kinds(pid: int, api_port: int, lm_port: int) -> dict[str, int]:
    """The open file descriptors of ``pid`` by kind: ``tcp_listen``, ``tcp_clients`` (accepted on
    ``api_port``), ``tcp_lm`` (the LM pool, to ``lm_port``), ``tcp_other``, ``socket_other`` (unix
    sockets, socket pairs), ``pipe``, ``anon_inode`` (epoll, eventfd, ...), ``file``; plus
    ``tcp_close_wait``, how many of the TCP ones the peer has closed but the server has not."""
    sockets: dict[str, tuple[int, int, str]] = {}  # inode -> (local port, remote port, state)
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                cols = line.split()
                local, remote = (int(address.rsplit(":", 1)[1], 16) for address in cols[1:3])
                sockets[cols[9]] = (local, remote, cols[3])
    kinds = dict.fromkeys(
        ("tcp_listen", "tcp_clients", "tcp_lm", "tcp_other", "socket_other", "pipe", "anon_inode", "file"), 0
    )
    kinds["tcp_close_wait"] = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:  # closed since listed
            continue
        if target.startswith("socket:["):
            found = sockets.get(target[8:-1])
            if found is None:
                kind = "socket_other"
            else:
                local, remote, state = found
                kinds["tcp_close_wait"] += state == TCP_CLOSE_WAIT
                if state == TCP_LISTEN:
                    kind = "tcp_listen"
                elif local == api_port:
                    kind = "tcp_clients"
                elif remote == lm_port:
                    kind = "tcp_lm"
                else:
                    kind = "tcp_other"
        elif target.startswith("pipe:"):
            kind = "pipe"
        elif target.startswith("anon_inode:"):
            kind = "anon_inode"
        else:
            kind = "file"
        kinds[kind] += 1
    return kinds


def well_formed(response_format: str, head: bytes, size: int) -> bool:
    """Whether a whole body of ``size`` bytes starting with ``head`` looks like ``response_format``."""
    if size == 0:
        return False
    if response_format == "pcm":
        return size % 2 == 0
    if response_format == "wav":
        return head[:4] == b"RIFF" and head[8:12] == b"WAVE"
    if response_format == "mp3":
        return head[:3] == b"ID3" or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0)
    if response_format == "opus":
        return head[:4] == b"OggS" and b"OpusHead" in head
    raise ValueError(f"unknown format {response_format!r}")


HEAD_BYTES = 64


async def _read_raw(response: aiohttp.ClientResponse, plan: PlannedRequest) -> RequestOutcome:
    head = b""
    size = 0
    async for chunk in response.content.iter_any():
        if not chunk:
            continue
        if plan.drop:
            response.close()  # closes the TCP connection: the server sees the client go away
            return RequestOutcome(plan.index, "dropped")
        if len(head) < HEAD_BYTES:
            head += chunk[: HEAD_BYTES - len(head)]
        size += len(chunk)
    if not well_formed(plan.response_format, head, size):
        return RequestOutcome(plan.index, "failed", "bad_body", f"{size} bytes, head {head[:12]!r}")
    return RequestOutcome(plan.index, "ok")


async def _sse_lines(response: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """The body's lines, however long (aiohttp's own line reader caps a line at 128 KiB)."""
    pending = b""
    async for chunk in response.content.iter_any():
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            yield line.decode("utf-8").strip()
    if pending:
        yield pending.decode("utf-8").strip()


async def _read_sse(response: aiohttp.ClientResponse, plan: PlannedRequest) -> RequestOutcome:
    head = b""
    size = 0
    done = finished = False
    async with contextlib.aclosing(_sse_lines(response)) as body_lines:
        async for line in body_lines:
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                finished = True
                break
            event = json.loads(data)
            kind = event.get("type")
            if kind == "speech.audio.delta":
                audio = base64.b64decode(event["audio"])
                if plan.drop and audio:
                    response.close()
                    return RequestOutcome(plan.index, "dropped")
                if len(head) < HEAD_BYTES:
                    head += audio[: HEAD_BYTES - len(head)]
                size += len(audio)
            elif kind == "speech.audio.done":
                done = True
            elif kind == "error":
                return RequestOutcome(plan.index, "failed", "sse_error", json.dumps(event)[:200])
    if not (done and finished) or not well_formed(plan.response_format, head, size):
        detail = f"done={done} [DONE]={finished} {size} bytes, head {head[:12]!r}"
        return RequestOutcome(plan.index, "failed", "bad_body", detail)
    return RequestOutcome(plan.index, "ok")


async def send_one(
    session: aiohttp.ClientSession, url: str, plan: PlannedRequest, config: SoakConfig
) -> RequestOutcome:
    """Send one streamed request; read it whole, or drop it after its first audio bytes."""
    body = {
        "model": "tts-1",
        "input": plan.text,
        "voice": plan.voice,
        "response_format": plan.response_format,
        "stream": True,
        "stream_format": "sse" if plan.sse else "audio",
        "max_tokens": config.max_tokens,
    }
    try:
        async with session.post(
            url, json=body, timeout=aiohttp.ClientTimeout(total=config.request_timeout_s)
        ) as response:
            if response.status != 200:
                detail = (await response.text())[:200]
                return RequestOutcome(plan.index, "failed", f"http_{response.status}", detail)
            reader = _read_sse if plan.sse else _read_raw
            return await reader(response, plan)
    except TimeoutError as exc:
        return RequestOutcome(plan.index, "failed", "timeout", repr(exc))
    except (aiohttp.ClientError, ValueError) as exc:  # ValueError: undecodable SSE JSON or base64
        return RequestOutcome(plan.index, "failed", "connection", repr(exc))


@dataclass
class SoakRun:
    """The client side of a soak against a running server ``pid`` at ``base_url``."""

    config: SoakConfig
    base_url: str
    pid: int
    lm_port: int
    log: Callable[[str], None]
    outcomes: list[RequestOutcome] = field(default_factory=list)
    samples: list[ProcSample] = field(default_factory=list)
    stopped_by_time_limit: bool = False
    snapshot: Callable[[], Path] | None = None  # takes a tracemalloc snapshot of the server
    snapshots: list[Path] = field(default_factory=list)
    _started: float = field(default=0.0, init=False)

    def sample(self, checkpoint: bool) -> ProcSample:
        rss_kib, threads = read_proc(self.pid)
        api_port = int(self.base_url.rstrip("/").rsplit(":", 1)[1])
        kinds = read_fd_kinds(self.pid, api_port, self.lm_port)
        fds = sum(count for kind, count in kinds.items() if kind != "tcp_close_wait")
        elapsed = round(time.monotonic() - self._started, 2)
        taken = ProcSample(len(self.outcomes), elapsed, rss_kib, fds, threads, kinds, checkpoint)
        self.samples.append(taken)
        return taken

    async def run(self) -> float:
        """Send every planned request, with a checkpoint after baseline_at and one at the end; the
        wall seconds. Each phase has its own client session, closed before its checkpoint."""
        plans = plan_requests(self.config)
        url = self.base_url.rstrip("/") + "/v1/audio/speech"
        self._started = time.monotonic()
        deadline = self._started + self.config.time_limit_s
        for phase in (plans[: self.config.baseline_at], plans[self.config.baseline_at :]):
            connector = aiohttp.TCPConnector(limit=self.config.concurrency)
            async with aiohttp.ClientSession(connector=connector) as session:
                await self._phase(session, url, phase, deadline)
            await asyncio.sleep(self.config.settle_s)
            taken = self.sample(checkpoint=True)
            self.log(
                f"checkpoint at {taken.completed} requests: rss {taken.rss_kib} KiB, "
                f"{taken.fds} fds {taken.fd_kinds}, {taken.threads} threads"
            )
            if self.snapshot is not None:
                self.snapshots.append(await asyncio.to_thread(self.snapshot))
            if self.stopped_by_time_limit:
                break
        return time.monotonic() - self._started

    async def _phase(
        self, session: aiohttp.ClientSession, url: str, plans: list[PlannedRequest], deadline: float
    ) -> None:
        queue = iter(plans)

        async def client() -> None:
            for plan in queue:
                if time.monotonic() > deadline:
                    self.stopped_by_time_limit = True
                    return
                self.outcomes.append(await send_one(session, url, plan, self.config))
                if len(self.outcomes) % self.config.sample_every == 0:
                    self.sample(checkpoint=False)

        await asyncio.gather(*(client() for _ in range(self.config.concurrency)))


def build_report(
    config: SoakConfig, run: SoakRun, wall_s: float, label: str, started_at: str
) -> dict[str, Any]:
    """The soak's JSON report: counts, the samples, the checkpoint comparison and the verdict."""
    counts = {kind: sum(o.outcome == kind for o in run.outcomes) for kind in ("ok", "dropped", "failed")}
    errors: dict[str, int] = {}
    for outcome in run.outcomes:
        if outcome.error is not None:
            errors[outcome.error] = errors.get(outcome.error, 0) + 1
    checkpoints = [s for s in run.samples if s.checkpoint]
    baseline = checkpoints[0] if checkpoints else None
    final = checkpoints[-1] if len(checkpoints) > 1 else None
    comparison: dict[str, Any] = {"baseline": asdict(baseline) if baseline else None}
    comparison["final"] = asdict(final) if final else None
    growth_pct = fds_delta = pool_fds_delta = threads_delta = None
    if baseline is not None and final is not None:
        growth_pct = round(100.0 * (final.rss_kib - baseline.rss_kib) / baseline.rss_kib, 3)
        fds_delta = final.fds - baseline.fds
        pool = final.fd_kinds["tcp_lm"] - baseline.fd_kinds["tcp_lm"]
        pool_fds_delta, fds_delta = pool, fds_delta - pool
        threads_delta = final.threads - baseline.threads
    comparison |= {
        "rss_growth_pct": growth_pct,
        "fds_delta": fds_delta,  # all but the LM keep-alive pool
        "lm_pool_fds_delta": pool_fds_delta,
        "threads_delta": threads_delta,
    }
    plans = plan_requests(config)
    mix = {
        f"{fmt}/{'sse' if sse else 'raw'}": sum(p.response_format == fmt and p.sse == sse for p in plans)
        for fmt in FORMATS
        for sse in (False, True)
    }
    completed_all = len(run.outcomes) == config.requests and not run.stopped_by_time_limit
    targets = {
        "all_requests_sent": completed_all,
        "rss_growth_under_pct": growth_pct is not None and growth_pct < config.max_rss_growth_pct,
        "fds_flat": fds_delta is not None and fds_delta <= 0,
        "lm_pool_bounded": final is not None and final.fd_kinds["tcp_lm"] <= config.concurrency,
        "threads_flat": threads_delta is not None and threads_delta <= 0,
        "no_failed_requests": counts["failed"] == 0,
    }
    return {
        "bench": "soak",
        "label": label,
        "started_at": started_at,
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(config).items()},
        "mix": mix,
        "requests": len(run.outcomes),
        **counts,
        "errors_by_kind": dict(sorted(errors.items())),
        "error_examples": sorted({f"{o.error}: {o.detail}" for o in run.outcomes if o.error})[:5],
        "wall_s": round(wall_s, 2),
        "stopped_by_time_limit": run.stopped_by_time_limit,
        "checkpoints": comparison,
        "samples": [asdict(s) for s in run.samples],
        "targets": targets,
        "pass": all(targets.values()),
        "client": machine(),
        "commit": _git_commit(),
    }


STDLIB = sysconfig.get_paths()["stdlib"]
IGNORED_TRACES = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>", "<unknown>")


def allocation_growth(before: Path, after: Path, top: int = 15) -> dict[str, Any]:
    """Where the server's traced Python allocations grew between two snapshots: the ``top`` source
    lines by growth, and the full traceback of the first three growth sites."""
    import tracemalloc

    ignore = [tracemalloc.Filter(False, pattern) for pattern in (*IGNORED_TRACES, tracemalloc.__file__)]
    old, new = (tracemalloc.Snapshot.load(str(path)).filter_traces(ignore) for path in (before, after))

    def where(frame: tracemalloc.Frame) -> str:
        name = frame.filename.removeprefix(str(ROOT) + os.sep).removeprefix(STDLIB + os.sep)
        return f"{name.rsplit('site-packages' + os.sep, 1)[-1]}:{frame.lineno}"

    lines = [d for d in new.compare_to(old, "lineno") if d.size_diff > 0][:top]
    stacks = [d for d in new.compare_to(old, "traceback") if d.size_diff > 0][:3]
    return {
        "traced_kib": [round(sum(t.size for t in snap.traces) / 1024, 1) for snap in (old, new)],
        "top_lines": [
            {
                "where": where(d.traceback[0]),
                "size_diff_kib": round(d.size_diff / 1024, 1),
                "count_diff": d.count_diff,
                "size_kib": round(d.size / 1024, 1),
            }
            for d in lines
        ],
        "top_tracebacks": [
            {"size_diff_kib": round(d.size_diff / 1024, 1), "stack": [where(f) for f in d.traceback]}
            for d in stacks
        ],
    }


def _git_commit() -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        )
        if done.returncode == 0:
            return done.stdout.strip()
    return None


def table(report: dict[str, Any]) -> str:
    """The checkpoints and counts as a short fixed-width table (fds: all but the LM keep-alive pool)."""
    cp = report["checkpoints"]
    lines = [f"{'':<9} {'requests':>8} {'rss MiB':>9} {'fds':>5} {'lm pool':>7} {'threads':>7}"]
    for name in ("baseline", "final"):
        s = cp[name]
        if s is not None:
            pool = s["fd_kinds"]["tcp_lm"]
            lines.append(
                f"{name:<9} {s['completed']:>8} {s['rss_kib'] / 1024:>9.1f} {s['fds'] - pool:>5} {pool:>7} "
                f"{s['threads']:>7}"
            )
    lines.append(
        f"{'growth':<9} {'':>8} {_signed(cp['rss_growth_pct'], '%'):>9} {_signed(cp['fds_delta']):>5} "
        f"{_signed(cp['lm_pool_fds_delta']):>7} {_signed(cp['threads_delta']):>7}"
    )
    lines.append(
        f"requests {report['requests']}: ok {report['ok']}, dropped {report['dropped']}, "
        f"failed {report['failed']}{' ' + str(report['errors_by_kind']) if report['failed'] else ''}; "
        f"wall {report['wall_s']:.1f} s"
        + (" (stopped by the time limit)" if report["stopped_by_time_limit"] else "")
    )
    if "tracemalloc" in report:
        lines.append("traced allocations that grew most between the checkpoints (KiB, blocks):")
        lines += [
            f"  {d['size_diff_kib']:>+9.1f} {d['count_diff']:>+7d}  {d['where']}"
            for d in report["tracemalloc"]["top_lines"][:8]
        ]
    missed = [name for name, met in report["targets"].items() if not met]
    lines.append("targets met" if not missed else "targets MISSED: " + ", ".join(missed))
    return "\n".join(lines)


def _signed(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:+.2f}{unit}" if isinstance(value, float) else f"{value:+d}{unit}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> list[str]:
    """A command prefix that has the child get SIGTERM when the soak process dies, even by SIGKILL
    (util-linux ``setpriv``; empty where it is missing, then only the normal exits stop the stack)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []


# `python -m app` with tracemalloc on; SIGUSR1 dumps a snapshot to PREFIX<n>.tm (n = 0, 1, ...)
TRACED_SERVER = """
import itertools, os, runpy, signal, sys, tracemalloc
frames, prefix = int(sys.argv[1]), sys.argv[2]
taken = itertools.count()
def dump(*_):
    path = f"{prefix}{next(taken)}.tm"
    tracemalloc.take_snapshot().dump(path + ".part")
    os.replace(path + ".part", path)
tracemalloc.start(frames)
signal.signal(signal.SIGUSR1, dump)
sys.argv = ["app"]
runpy.run_module("app", run_name="__main__", alter_sys=True)
"""


class DemoStack:
    """The fake vLLM and the server as subprocesses on free loopback ports; logs in a temp folder."""

    def __init__(self, config: SoakConfig, python: str = sys.executable) -> None:
        self.config = config
        self.python = python
        self.logs = Path(tempfile.mkdtemp(prefix="soak_"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.api_port = self.lm_port = 0

    @property
    def api(self) -> subprocess.Popen[bytes]:
        return self.procs[-1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> None:
        with open(self.logs / f"{name}.log", "wb") as out:
            self.procs.append(
                subprocess.Popen(
                    [*_die_with_parent(), self.python, *args],
                    cwd=ROOT,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )

    def start(self, ready_timeout_s: float = 180.0) -> None:
        """Start both, wait until the server's ``/ready`` answers 200 (RuntimeError with the logs if not)."""
        codec = self.config.codec_model
        if not (codec / "pytorch_model.bin").exists():
            raise RuntimeError(
                f"no tiny codec at {codec}: run `python -m app.tools.fixtures --out .fixtures`"
            )
        self.lm_port, self.api_port = _free_port(), _free_port()
        lm_port = self.lm_port
        env = dict(os.environ)
        self._spawn(
            "lm",
            ["-m", "tests.fakes.fake_vllm", "--port", str(lm_port), "--tokens-per-s",
             str(self.config.tokens_per_s), "--tokens-per-event", "1"],
            env,
        )  # fmt: skip
        server_env = env | {
            "LM_BACKEND": "http",
            "TTS_API": f"http://127.0.0.1:{lm_port}",
            "CODEC_MODEL": str(codec),
            "DEVICE": "cpu",
            "REFERENCE_VOICES": "false",
            "HOST": "127.0.0.1",
            "PORT": str(self.api_port),
            "LOG_LEVEL": "warning",
            "SHUTDOWN_GRACE_S": "2",
        }
        frames = self.config.tracemalloc_frames
        traced = ["-c", TRACED_SERVER, str(frames), str(self.logs / "snapshot_")]
        self._spawn("api", traced if frames > 0 else ["-m", "app"], server_env)
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{proc.args} exited with {proc.returncode}:\n{self.log_tail()}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(self.url + "/ready", timeout=2) as answer,
            ):
                if answer.status == 200:
                    return
            time.sleep(0.5)
        raise RuntimeError(f"the server was not ready within {ready_timeout_s:.0f} s:\n{self.log_tail()}")

    def snapshot(self, timeout_s: float = 300.0) -> Path:
        """Have the traced server dump a tracemalloc snapshot; its path once written."""
        path = self.logs / f"snapshot_{len(list(self.logs.glob('snapshot_*.tm')))}.tm"
        self.api.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while not path.exists():
            if time.monotonic() > deadline or self.api.poll() is not None:
                raise RuntimeError(f"no tracemalloc snapshot from the server:\n{self.log_tail()}")
            time.sleep(0.2)
        return path

    def log_tail(self, lines: int = 20) -> str:
        parts = []
        for path in sorted(self.logs.glob("*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(parts)

    def stop(self) -> None:
        """SIGTERM both, SIGKILL what is left after 10 s, remove the logs."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        with contextlib.suppress(OSError):
            for path in self.logs.iterdir():  # logs and snapshots
                path.unlink()
            self.logs.rmdir()


@contextlib.contextmanager
def sigterm_exits() -> Iterator[None]:
    """Turn SIGTERM into SystemExit for the duration, so ``finally`` blocks stop the subprocesses."""

    def handler(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_soak(config: SoakConfig, label: str = "", log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Start the demo stack, soak it, stop it; the report."""
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    stack = DemoStack(config)
    growth: dict[str, Any] | None = None
    with sigterm_exits():
        try:
            stack.start()
            log(f"server pid {stack.api.pid} ready at {stack.url}; fake vLLM pid {stack.procs[0].pid}")
            run = SoakRun(config, stack.url, stack.api.pid, stack.lm_port, log)
            if config.tracemalloc_frames > 0:
                run.snapshot = stack.snapshot
            wall_s = asyncio.run(run.run())
            if stack.api.poll() is not None:
                raise RuntimeError(f"the server exited during the soak:\n{stack.log_tail()}")
            growth = allocation_growth(*run.snapshots[:2]) if len(run.snapshots) > 1 else None
        finally:
            stack.stop()
    report = build_report(config, run, wall_s, label, started_at)
    if growth is not None:
        report["tracemalloc"] = {"frames": config.tracemalloc_frames, **growth}
    return report


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    defaults = SoakConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=defaults.requests)
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
    parser.add_argument("--drop-fraction", type=float, default=defaults.drop_fraction)
    parser.add_argument("--baseline-at", type=int, default=defaults.baseline_at, help="first checkpoint")
    parser.add_argument("--sample-every", type=int, default=defaults.sample_every)
    parser.add_argument("--settle-s", type=float, default=defaults.settle_s, help="idle before a checkpoint")
    parser.add_argument("--tokens-per-s", type=float, default=defaults.tokens_per_s, help="fake LM pace")
    parser.add_argument("--max-tokens", type=int, default=defaults.max_tokens)
    parser.add_argument("--request-timeout-s", type=float, default=defaults.request_timeout_s)
    parser.add_argument("--time-limit-s", type=float, default=defaults.time_limit_s, help="of sending")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="which requests are dropped")
    parser.add_argument("--max-rss-growth-pct", type=float, default=defaults.max_rss_growth_pct)
    parser.add_argument("--codec-model", type=Path, default=defaults.codec_model, help="a tiny codec dir")
    parser.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="FRAMES",
        help="diagnose: trace the server's allocations (FRAMES deep) and list where they grew between the "
        "checkpoints (slows the server; RSS figures then include tracemalloc's own memory)",
    )
    parser.add_argument("--label", default="", help="what was measured")
    parser.add_argument("--out", help="report file (bare name: bench/results/NAME)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the soak; 0 when every target is met, 1 when one is missed or a request failed."""
    args = parse_args(argv)
    config = SoakConfig(
        requests=args.requests,
        concurrency=args.concurrency,
        drop_fraction=args.drop_fraction,
        baseline_at=args.baseline_at,
        sample_every=args.sample_every,
        settle_s=args.settle_s,
        tokens_per_s=args.tokens_per_s,
        max_tokens=args.max_tokens,
        request_timeout_s=args.request_timeout_s,
        time_limit_s=args.time_limit_s,
        seed=args.seed,
        max_rss_growth_pct=args.max_rss_growth_pct,
        codec_model=args.codec_model,
        tracemalloc_frames=args.tracemalloc,
    )
    report = run_soak(config, args.label)
    text = json.dumps(report, indent=2, ensure_ascii=False)
    if args.out:
        path = output_path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    print(text)
    print(table(report), file=sys.stderr)
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
