"""Operations endpoints: Prometheus ``/metrics``, and the completion of the OpenAPI document."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response

from app.core import routes
from app.observability.metrics import Metrics

router = APIRouter(tags=["operations"])


@router.get(routes.METRICS, include_in_schema=False)
async def metrics(request: Request) -> Response:
    """Every metric in Prometheus' text format."""
    registry: Metrics = request.app.state.metrics
    body = await asyncio.to_thread(registry.exposition)
    return Response(body, media_type=registry.content_type)


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}
SHARED_RESPONSES: dict[str, dict[str, Any]] = {
    "401": {"description": "API keys are configured and the request has no valid one."},
    "429": {
        "description": "Every stream slot is busy and the wait queue is full or timed out.",
        "headers": {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}},
    },
}


def install_openapi(app: FastAPI, synthesis_paths: frozenset[str]) -> None:
    """Complete the generated schema: the bearer scheme on /v1 routes, their 401/429 answers, and
    the OpenAI error body on every documented error."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()
        components = schema.setdefault("components", {})
        schemas = components.setdefault("schemas", {})
        schemas["OpenAIError"] = ERROR_SCHEMA
        for unused in ("HTTPValidationError", "ValidationError"):  # FastAPI's 422 body, never sent here
            schemas.pop(unused, None)
        components.setdefault("securitySchemes", {})["bearerAuth"] = {
            "type": "http",
            "scheme": "bearer",
            "description": "Needed only when the server sets API_KEYS; any key is accepted otherwise.",
        }
        error_body = {"application/json": {"schema": {"$ref": "#/components/schemas/OpenAIError"}}}
        for path, operations in schema.get("paths", {}).items():
            for operation in operations.values():
                if "422" in operation.get("responses", {}):  # our 422s carry the OpenAI body too
                    operation["responses"]["422"]["content"] = error_body
            if not path.startswith(routes.API_PREFIX):
                continue
            for operation in operations.values():
                operation["security"] = [{"bearerAuth": []}, {}]
                codes = ("401", "429") if path in synthesis_paths else ("401",)
                for code in codes:
                    operation.setdefault("responses", {})[code] = SHARED_RESPONSES[code] | {
                        "content": error_body
                    }
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to customise the schema
