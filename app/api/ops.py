"""Operations endpoints: Prometheus ``/metrics`` and the Scalar API reference at ``/scalar``."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from scalar_fastapi import get_scalar_api_reference

from app.observability.metrics import Metrics

router = APIRouter(tags=["operations"])


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Every metric in Prometheus' text format."""
    registry: Metrics = request.app.state.metrics
    body = await asyncio.to_thread(registry.exposition)
    return Response(body, media_type=registry.content_type)


@router.get("/scalar", include_in_schema=False)
async def scalar(request: Request) -> HTMLResponse:
    """Interactive API reference over ``/openapi.json``."""
    return get_scalar_api_reference(openapi_url=request.app.openapi_url, title=request.app.title)
