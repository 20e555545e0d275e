"""Metrics of servers with several workers on one host (``python -m app`` with WORKERS=2, as the image
runs): each server instance merges its own workers' values only, a second server's start does not touch
them, and a worker killed with SIGKILL leaves no live gauge behind."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from tests.fakes.fake_vllm import FakeVLLM, Script
from tests.scale.conftest import ROOT, START_TIMEOUT_S, ServerProcess, free_port, server_env, stop
from tests.scale.test_two_servers import base_settings, metric

SPEECH = "/v1/audio/speech"
SPOKEN = {"method": "POST", "route": SPEECH, "status": "200"}


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (its workers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return sorted(found)


def worker_of_connection(supervisor: int, client_port: int) -> int:
    """The worker of ``supervisor`` holding the server end of the loopback connection from ``client_port``
    (its socket's inode in /proc/net/tcp, found among the worker's open files)."""
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[2].split(":")[1], 16) == client_port:  # the remote end is the client
            inodes.add(fields[9])
    for pid in children(supervisor):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return pid
    raise AssertionError(f"no worker of {supervisor} holds the connection from port {client_port}")


async def dead(pid: int) -> None:
    """Return once process ``pid`` has died (gone, or a zombie not reaped yet)."""
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state == "Z":
            return
        await asyncio.sleep(0.02)


@asynccontextmanager
async def main_server(settings: dict[str, str], log: Path) -> AsyncIterator[ServerProcess]:
    """``python -m app`` with WORKERS=2 on a free port, with no PROMETHEUS_MULTIPROC_DIR of its own (the
    default), ready when yielded (both workers answering), stopped with SIGTERM at the end."""
    port = free_port()
    env = server_env(settings | {"WORKERS": "2", "HOST": "127.0.0.1", "PORT": str(port)}, None)
    with open(log, "wb") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app", cwd=ROOT, env=env, stdout=out, stderr=out
        )
    server = ServerProcess(f"http://127.0.0.1:{port}", process, log)
    try:
        await workers_ready(server, 2)
        yield server
    finally:
        await stop(server)


async def workers_ready(server: ServerProcess, count: int) -> None:
    """Wait until ``count`` workers run and /ready answers 200 (several times: any worker may answer)."""
    deadline = asyncio.get_running_loop().time() + START_TIMEOUT_S
    async with httpx.AsyncClient(timeout=2) as client:
        ready = 0
        while asyncio.get_running_loop().time() < deadline and server.process.returncode is None:
            try:
                alive = len(children(server.process.pid)) >= count
                ok = (await client.get(server.url + "/ready")).status_code == 200
                ready = ready + 1 if alive and ok else 0
            except httpx.TransportError:
                ready = 0
            if ready >= 6:
                return
            await asyncio.sleep(0.2)
    raise RuntimeError(f"server {server.url} did not become ready; its log:\n{server.log.read_text()}")


async def scrape(client: httpx.AsyncClient, server: ServerProcess) -> str:
    return (await client.get(server.url + "/metrics")).text


async def test_two_servers_with_workers_keep_their_own_metrics_and_a_killed_worker_leaves_no_live_gauge(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path
) -> None:
    settings = base_settings(tiny_codec_dir, fake_vllm, tmp_path) | {
        "REFERENCE_VOICES": "false",
        "VOICES_DIR": str(tmp_path / "voices"),
        "INTERLEAVE_STORE": "memory",
    }
    async with main_server(settings, tmp_path / "a.log") as a, httpx.AsyncClient(timeout=30) as client:
        for _ in range(3):
            assert (
                await client.post(a.url + SPEECH, json={"input": "Hello.", "stream": False})
            ).status_code == 200
        assert metric(await scrape(client, a), "tts_http_requests_total", **SPOKEN) == 3
        async with main_server(settings, tmp_path / "b.log") as b:
            assert (
                await client.post(b.url + SPEECH, json={"input": "Hi.", "stream": False})
            ).status_code == 200
            assert metric(await scrape(client, b), "tts_http_requests_total", **SPOKEN) == 1
            assert metric(await scrape(client, a), "tts_http_requests_total", **SPOKEN) == 3, (
                "b's start wiped a's"
            )

        fake_vllm.script = Script(codes=list(range(1000, 1300)), tokens_per_event=1, tokens_per_s=20)
        async with (
            httpx.AsyncClient(timeout=30) as streamer,
            streamer.stream("POST", a.url + SPEECH, json={"input": "A long one."}) as streaming,
        ):
            assert streaming.status_code == 200
            assert metric(await scrape(client, a), "tts_active_streams") == 1
            client_port = streaming.extensions["network_stream"].get_extra_info("client_addr")[1]
            serving = worker_of_connection(a.process.pid, client_port)
            os.kill(serving, signal.SIGKILL)
        await asyncio.wait_for(dead(serving), 10)
        async with httpx.AsyncClient(timeout=30) as fresh:  # no kept-alive connection to the dead worker
            text = await scrape(fresh, a)  # by the other worker, while the supervisor replaces the dead one
        assert metric(text, "tts_active_streams") == 0, "a killed worker's live gauge is still counted"
        assert metric(text, "tts_http_requests_total", **SPOKEN) == 3, "the killed worker's counters stay"
