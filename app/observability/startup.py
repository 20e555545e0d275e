"""Startup as a person at a terminal sees it: steps with progress, one line when it fails, one when ready.

- ``startup_step(setting, value, what)`` wraps one piece of startup work (a device, a model load) of any
  model family: its progress task reports a heartbeat and the bars of downloads and loads inside it,
  and whatever it raises leaves as a ``StartupError`` naming ``setting`` (``startup_errors.explain``).
- ``StartupGuard`` wraps the ASGI app for ``python -m app``: when the lifespan startup fails it logs the
  one line at ERROR and the traceback at DEBUG only, keeps uvicorn from logging the traceback and its
  own "Application startup failed" line, and holds the failure for the process's exit status.
- ``check_listen`` fails at once, naming PORT or HOST, when the server could not listen where it should.
- ``ready_line`` is the one record logged once the server listens: URL, models, voices, a curl example.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shlex
import socket
from collections.abc import AsyncIterator, Sequence
from typing import Any

from app.observability.progress import Task, heartbeat, task
from app.observability.startup_errors import StartupError, explain, listen_problem

log = logging.getLogger("app.startup")
_UVICORN_FAILED = "Application startup failed. Exiting."


@contextlib.asynccontextmanager
async def startup_step(setting: str, value: str, what: str, *, tick_s: float = 1.0) -> AsyncIterator[Task]:
    """Run the block as the startup step that loads ``what`` from ``setting`` (= ``value``).

    While it runs, a heartbeat reports the elapsed time every ``tick_s`` unless a progress bar inside
    reported (a download, transformers' weight loading); a step that took longer than one tick ends
    with a "ready in N s" record. An exception leaves as ``explain(exc, setting, value)``.
    """
    with task(f"{what} ({setting}={value})" if value else f"{what} ({setting})") as work:
        beat = asyncio.create_task(heartbeat(work, tick_s))
        try:
            yield work
        except Exception as exc:
            raise explain(exc, setting, value) from exc
        finally:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        if work.elapsed() >= tick_s:
            work.done(f"ready in {work.elapsed():.1f} s")


class StartupGuard(logging.Filter):
    """An ASGI wrapper that turns a failed lifespan startup into one log line and an exit status.

    Install it as the filter of the ``uvicorn.error`` logger too: once a failure is held it drops
    uvicorn's own "Application startup failed. Exiting." line.
    """

    def __init__(self, app: Any) -> None:
        super().__init__()
        self.app = app
        self.failure: StartupError | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        started = False

        async def quiet_send(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "lifespan.startup.complete":
                started = True
            if message["type"] == "lifespan.startup.failed":
                message = {**message, "message": ""}  # the traceback: logged at DEBUG below instead
            await send(message)

        try:
            await self.app(scope, receive, quiet_send)
        except Exception as exc:
            if started:
                raise
            self.failure = explain(exc)
            log.error("%s", self.failure, extra={"setting": self.failure.setting or None})
            log.debug("startup traceback", exc_info=exc)
            raise

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.failure is not None and record.getMessage() == _UVICORN_FAILED)


def check_listen(host: str, port: int) -> None:
    """Bind ``host``:``port`` as uvicorn will (SO_REUSEADDR; IPv6 when the host has a colon) and let it go
    again, so that a busy port or a foreign address fails at once, naming PORT or HOST
    (``listen_problem``), instead of after the models have loaded. A check, not a reservation: a process
    that takes the port during the load still makes uvicorn's own bind fail."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise listen_problem(exc, host, port) from exc


def client_url(host: str, port: int) -> str:
    """The URL a client on this machine uses for a server bound to ``host`` (any-address -> localhost)."""
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "localhost"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def ready_line(
    url: str, models: Sequence[str], voices: Sequence[str], aliases: int, registered: int
) -> tuple[str, dict[str, Any]]:
    """The "ready" message and its fields: URL, models, voices and a curl example that writes a WAV (of
    the default model and its first voice: a shell command that works as printed, tested against the
    demo in ``tests/observability/test_demo.py``)."""
    body = json.dumps({"input": "Hello!", "voice": voices[0], "response_format": "wav", "stream": False})
    data = shlex.quote(body)  # a voice name with a quote in it must not end the shell word
    example = f"curl -s {url}/v1/audio/speech -H 'Content-Type: application/json' -d {data} -o hello.wav"
    voice_text = ", ".join(voices)
    if aliases:
        voice_text += f" (+{aliases} aliases)"
    if registered:
        voice_text += f" (+{registered} registered)"
    message = f"ready on {url}: models {', '.join(models)}; voices {voice_text}. Try: {example}"
    return message, {"url": url, "models": list(models), "voices": list(voices), "example": example}
