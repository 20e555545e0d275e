"""Probes: ``/`` (clients prewarm with it), ``/health`` (liveness) and ``/ready`` (readiness)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

router = APIRouter(tags=["health"])


@router.get("/")
async def root() -> dict[str, str]:
    """A cheap 200 with pointers (LiveKit's plugin GETs the base URL to prewarm)."""
    return {"service": "tts-server", "docs": "/docs", "speech": "/v1/audio/speech"}


@router.get("/health")
async def health() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/ready", response_model=None)
async def ready(request: Request) -> dict[str, Any] | JSONResponse:
    """Readiness: 200 when the codec is loaded and the LM source can start a generation, else 503."""
    checks = await request.app.state.engine.ready()
    body = {"status": "ready" if all(checks.values()) else "not_ready", "checks": checks}
    return body if all(checks.values()) else JSONResponse(body, status_code=503)
