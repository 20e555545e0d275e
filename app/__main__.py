"""``python -m app``: serve with uvicorn on HOST:PORT from the settings (the container runs this too).

Logging is configured here (LOG_FORMAT, LOG_LEVEL), for the whole process; uvicorn's own access log is
off because the app writes one access line per request. On SIGTERM (or Ctrl-C) uvicorn stops
accepting connections, lets in-flight responses finish for up to SHUTDOWN_GRACE_S, cancels the rest,
then runs the lifespan shutdown that closes the engine (codec threads, LM sessions) and the exporters.

A setting that does not validate ends the process with one line per setting (exit status 2); an address
that cannot be bound (PORT busy, HOST not of this machine) with one line naming the setting, before any
model loads (exit status 3); a startup that fails (a model that cannot be found or loaded, a device that
is not there) with the one line of ``StartupGuard`` (exit status 3); Ctrl-C while starting exits at once
(130). Once the server listens it
logs one "ready" line with a curl example.
A connection that does not send its request headers within HEADER_READ_TIMEOUT_S is closed (408), one
whose headers pass MAX_HEADER_BYTES is answered 431, and one whose client stops reading a response for
WRITE_STALL_TIMEOUT_S is closed (``app.api.connection``).
WORKERS > 1 starts that many processes; each configures its logging and builds its own app (the
one-line startup errors and the ready line are those of a single process), and their metrics meet in a
directory of this server's own (``prepare_multiprocess_metrics``).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI
from pydantic import ValidationError

from app.api.connection import ConnectionLimits, connection_protocol
from app.config import Settings
from app.core.errors import APIError
from app.core.settings import ServerSettings
from app.main import create_app
from app.observability.logging import configure_logging
from app.observability.startup import StartupGuard, check_listen, client_url, ready_line
from app.observability.startup_errors import INVALID_SETTINGS, StartupError, settings_problems
from app.synthesis.engine import Engine

log = logging.getLogger("app.startup")


def server_options(settings: ServerSettings) -> dict[str, Any]:
    """The uvicorn settings this server runs with (besides the app), from ``settings``."""
    return {
        "host": settings.HOST,
        "port": settings.PORT,
        "log_level": settings.LOG_LEVEL,
        "log_config": None,
        "access_log": False,
        "timeout_graceful_shutdown": settings.SHUTDOWN_GRACE_S,
        "http": connection_protocol(connection_limits(settings)),
        "h11_max_incomplete_event_size": 2 * settings.MAX_HEADER_BYTES,  # ours answers first (431)
    }


def connection_limits(settings: ServerSettings) -> ConnectionLimits:
    """The per-connection limits of the server's protocol (``app.api.connection``)."""
    return ConnectionLimits(
        header_timeout_s=settings.HEADER_READ_TIMEOUT_S,
        max_header_bytes=settings.MAX_HEADER_BYTES,
        write_stall_s=settings.WRITE_STALL_TIMEOUT_S,
    )


def prepare_multiprocess_metrics() -> Path:
    """Several workers: their metrics go through a directory of this server instance's own, made new under
    PROMETHEUS_MULTIPROC_DIR (or the system's temp directory) and handed to the workers in that variable,
    so that ``/metrics`` on any worker sums this server's workers and no other's. Another server on the
    host, or an earlier run, has a directory of its own: nothing of theirs is read or removed. The caller
    removes it when the server stops."""
    parent = Path(os.environ.get("PROMETHEUS_MULTIPROC_DIR") or tempfile.gettempdir())
    parent.mkdir(parents=True, exist_ok=True)
    directory = Path(tempfile.mkdtemp(prefix=f"tts-metrics-{os.getpid()}-", dir=parent))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    return directory


def worker_app() -> FastAPI:
    """The app of one worker process (``WORKERS`` > 1): logging configured in that process."""
    settings = Settings()
    configure_logging(settings)
    return create_app(settings)


class Server(uvicorn.Server):
    """uvicorn's server, which logs the ready line once its sockets listen, and which Ctrl-C (or SIGTERM)
    stops at once while it is still starting: uvicorn itself would wait for the lifespan startup, so a
    model download or load would run to its end first. Nothing is being served yet, so nothing is lost
    (an interrupted Hub download resumes next time)."""

    def __init__(self, config: uvicorn.Config, app: FastAPI, settings: ServerSettings) -> None:
        super().__init__(config)
        self.fastapi_app = app
        self.settings = settings

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            await log_ready(self.fastapi_app, self.settings)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self.started:
            log.warning("interrupted while starting (signal %d): exiting now", sig)
            logging.shutdown()
            os._exit(128 + sig)
        super().handle_exit(sig, frame)


async def log_ready(app: FastAPI, settings: ServerSettings) -> None:
    """The ready line: where to send requests, what this server serves, and a request to try."""
    engine: Engine = app.state.engine
    url = client_url(settings.HOST, settings.PORT)
    voices = engine.default.voices
    try:
        registered = len(await engine.registry.voices())
    except APIError:  # the shared voice store is down: the ready line does not wait for it
        registered = 0
    message, fields = ready_line(
        url, engine.model_ids(), list(voices.voices), len(voices.aliases), registered
    )
    log.info("%s", message, extra=fields)
    not_ready = [part for part, ok in (await engine.ready()).items() if not ok]
    if not_ready:
        log.warning(
            "not ready yet: %s; requests that need it fail and /ready reports it until it is",
            ", ".join(not_ready),
        )


def main() -> None:
    try:
        settings = Settings()
    except ValidationError as exc:
        for line in settings_problems(exc.errors()):
            print(line, file=sys.stderr)
        sys.exit(INVALID_SETTINGS)
    configure_logging(settings)
    try:
        check_listen(settings.HOST, settings.PORT)
    except StartupError as failure:
        log.error("%s", failure, extra={"setting": failure.setting})
        sys.exit(failure.exit_code)
    if settings.WORKERS > 1:
        metrics_dir = prepare_multiprocess_metrics()
        try:
            uvicorn.run(
                "app.__main__:worker_app", factory=True, workers=settings.WORKERS, **server_options(settings)
            )
        finally:
            shutil.rmtree(metrics_dir, ignore_errors=True)
        return
    app = create_app(settings)
    guard = StartupGuard(app)
    logging.getLogger("uvicorn.error").addFilter(guard)
    config = uvicorn.Config(guard, **server_options(settings))
    try:
        Server(config, app, settings).run()
    except SystemExit:
        if guard.failure is None:
            raise
    if guard.failure is not None:
        sys.exit(guard.failure.exit_code)


if __name__ == "__main__":
    main()
