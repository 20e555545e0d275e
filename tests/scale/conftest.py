"""Scale-out harness: server processes (``uvicorn --factory app.main:create_app``) sharing one store.

Each server is its own process, as a uvicorn worker or a replica is, started on the tiny codec and
talking to a fake vLLM that runs in the test's event loop (so its recorded prompts can be read). A
unique key prefix per test keeps the tests apart on the project's Redis at 127.0.0.1:6379; its keys
are deleted afterwards.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.config import Settings
from app.core.settings import env_names
from tests.api.conftest import fake_vllm, reference_wav  # noqa: F401  (fixtures shared with the API tests)
from tests.interleave.conftest import REDIS_URL, redis_prefix  # noqa: F401  (a test's own Redis keys)

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class ServerProcess:
    """One running server: its base URL, its process and its log file."""

    url: str
    process: asyncio.subprocess.Process
    log: Path


def server_env(settings: dict[str, str], multiproc_dir: Path | None) -> dict[str, str]:
    """The process environment of a server: this one without any setting, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if k not in env_names(Settings)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    if multiproc_dir is not None:
        env["PROMETHEUS_MULTIPROC_DIR"] = str(multiproc_dir)
    return env | settings


async def _wait_ready(server: ServerProcess) -> None:
    deadline = asyncio.get_running_loop().time() + START_TIMEOUT_S
    async with httpx.AsyncClient(timeout=2) as client:
        while asyncio.get_running_loop().time() < deadline:
            if server.process.returncode is not None:
                break
            try:
                if (await client.get(server.url + "/ready")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError(f"server {server.url} did not become ready; its log:\n{server.log.read_text()}")


async def _spawn(settings: dict[str, str], log: Path, multiproc_dir: Path | None) -> ServerProcess:
    port = free_port()
    with open(log, "wb") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "uvicorn", "--factory", "app.main:create_app",
            "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
            cwd=ROOT, env=server_env(settings, multiproc_dir), stdout=out, stderr=out,
        )  # fmt: skip
    return ServerProcess(f"http://127.0.0.1:{port}", process, log)


async def stop(server: ServerProcess) -> None:
    """SIGTERM (a graceful shutdown: the lifespan closes the engine), then wait; kill after 20 s."""
    if server.process.returncode is None:
        server.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(server.process.wait(), 20)
        except TimeoutError:
            server.process.kill()
            await server.process.wait()


@asynccontextmanager
async def server_processes(
    settings: dict[str, str], tmp_path: Path, names: Sequence[str], multiproc_dir: Path | None
) -> AsyncIterator[list[ServerProcess]]:
    """One server process per name with the same settings, started at once; each is ready when
    yielded and stopped (SIGTERM) at the end. A server that fails to start raises with its log."""
    servers: list[ServerProcess] = []
    try:
        for name in names:
            servers.append(await _spawn(settings, tmp_path / f"{name}.log", multiproc_dir))
        await asyncio.gather(*(_wait_ready(server) for server in servers))
        yield servers
    finally:
        await asyncio.gather(*(stop(server) for server in servers))
