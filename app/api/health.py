"""Probes: ``/`` (clients prewarm with it), ``/health`` (liveness) and ``/ready`` (readiness)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.core import routes

router = APIRouter(tags=["health"])

READY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Ready to serve.",
        "content": {
            "application/json": {"example": {"status": "ready", "checks": {"codec": True, "lm": True}}}
        },
    },
    503: {
        "description": "Not ready; `reason` says why.",
        "content": {
            "application/json": {
                "example": {
                    "status": "not_ready",
                    "checks": {"codec": True, "lm": False},
                    "reason": "not ready: lm",
                }
            }
        },
    },
}


@router.get(routes.ROOT)
async def root() -> dict[str, str]:
    """A cheap 200 with pointers (LiveKit's plugin GETs the base URL to prewarm)."""
    return {"service": "tts-server", "docs": routes.DOCS, "speech": routes.SPEECH}


@router.get(routes.HEALTH)
async def health() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get(routes.READY, response_model=None, responses=READY_RESPONSES)
async def ready(request: Request) -> dict[str, Any] | JSONResponse:
    """Readiness: 200 when the engine is started, the codec worker runs and the LM source answers
    within READY_TIMEOUT_S; else 503 with the failing checks and the reason."""
    engine = getattr(request.app.state, "engine", None)
    if engine is None:
        checks, reason = {"engine": False}, "the engine is not started"
    else:
        timeout = engine.settings.READY_TIMEOUT_S
        try:
            async with asyncio.timeout(timeout):
                checks = await engine.ready()
            reason = None
        except TimeoutError:
            checks = {"lm": False}
            reason = f"the LM backend did not answer within {timeout:g} s"
        failing = [name for name, ok in checks.items() if not ok]
        if reason is None and failing:
            reason = "not ready: " + ", ".join(failing)
    if reason is None and engine is not None:
        body: dict[str, Any] = {"status": "ready", "checks": checks}
        body.update(engine.details())  # what was chosen at startup and why (e.g. CODEC_DTYPE=auto)
        return body
    return JSONResponse({"status": "not_ready", "checks": checks, "reason": reason}, status_code=503)
