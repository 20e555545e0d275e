"""StartupGuard on its own (a failing lifespan becomes one held failure, uvicorn gets no traceback) and
the pieces of the ready line."""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from fastapi import FastAPI

from app.observability.startup import StartupGuard, client_url, ready_line
from app.observability.startup_errors import StartupError


def app_failing_with(exc: Exception | None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if exc is not None:
            raise exc
        yield

    return FastAPI(lifespan=lifespan)


async def run_lifespan(guard: StartupGuard) -> tuple[list[dict[str, Any]], Exception | None]:
    """Drive the ASGI lifespan as uvicorn does (startup, then shutdown): the messages the app sent and
    what it raised (uvicorn ignores that once startup.failed was sent)."""
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    try:
        await guard({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
    except Exception as exc:
        return sent, exc
    return sent, None


async def test_failed_startup_is_held_and_uvicorn_gets_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    guard = StartupGuard(app_failing_with(StartupError("DEVICE", "cuda", "no CUDA here", "Set DEVICE=cpu")))
    with caplog.at_level(logging.DEBUG, logger="app.startup"):
        sent, raised = await run_lifespan(guard)
    assert sent == [{"type": "lifespan.startup.failed", "message": ""}]
    assert raised is guard.failure
    assert guard.failure is not None and guard.failure.setting == "DEVICE"
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == ["cannot start: DEVICE='cuda': no CUDA here. Set DEVICE=cpu."]
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert debug[0].getMessage() == "startup traceback" and debug[0].exc_info is not None
    uvicorn_line = logging.makeLogRecord({"msg": "Application startup failed. Exiting."})
    assert not guard.filter(uvicorn_line)
    assert guard.filter(logging.makeLogRecord({"msg": "Started server process [1]"}))


async def test_unexpected_exception_gets_the_generic_line() -> None:
    guard = StartupGuard(app_failing_with(KeyError("VOICES")))
    _, raised = await run_lifespan(guard)
    assert isinstance(raised, KeyError)
    assert str(guard.failure) == "cannot start: KeyError: 'VOICES'. LOG_LEVEL=debug prints the traceback."


async def test_successful_startup_passes_through() -> None:
    guard = StartupGuard(app_failing_with(None))
    sent, raised = await run_lifespan(guard)
    assert raised is None
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert guard.failure is None
    assert guard.filter(logging.makeLogRecord({"msg": "Application startup failed. Exiting."}))


def test_client_url_and_ready_line() -> None:
    assert client_url("0.0.0.0", 9091) == "http://localhost:9091"
    assert client_url("::", 80) == "http://localhost:80"
    assert client_url("10.0.0.5", 9091) == "http://10.0.0.5:9091"
    assert client_url("fe80::1", 9091) == "http://[fe80::1]:9091"
    message, fields = ready_line("http://localhost:9091", ["TTS-model", "tts-1"], ["anna", "ben"], 13, 2)
    assert message.startswith("ready on http://localhost:9091: models TTS-model, tts-1; ")
    assert "; voices anna, ben (+13 aliases) (+2 registered). Try: curl " in message
    assert fields["example"] == (
        "curl -s http://localhost:9091/v1/audio/speech -H 'Content-Type: application/json' "
        """-d '{"input": "Hello!", "voice": "anna", "response_format": "wav", "stream": false}' """
        "-o hello.wav"
    )
    assert message.endswith("Try: " + fields["example"])


def test_the_try_command_keeps_a_quote_in_a_voice_name() -> None:
    _, fields = ready_line("http://localhost:9091", ["m"], ["o'neil"], 0, 0)
    words = shlex.split(fields["example"])
    assert json.loads(words[words.index("-d") + 1])["voice"] == "o'neil"
    assert words[-2:] == ["-o", "hello.wav"]
