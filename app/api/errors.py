"""One place that turns every error into the OpenAI error body ``{"error": {...}}``."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.core.errors import APIError, ClientDisconnected, InvalidRequest, ValidationFailed

log = logging.getLogger(__name__)


def _param(loc: tuple[object, ...]) -> str | None:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or None


def validation_error(exc: RequestValidationError) -> APIError:
    """The first pydantic error as an APIError: malformed JSON -> 400, field errors -> 422."""
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
    if first.get("type") == "json_invalid":
        return InvalidRequest(f"Malformed JSON body: {first.get('msg')}", code="invalid_json")
    param = _param(tuple(first.get("loc", ())))
    message = f"{param}: {first['msg']}" if param else str(first["msg"])
    return ValidationFailed(message, param=param)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""

    async def on_api_error(request: Request, exc: APIError) -> Response:
        if exc.status >= 500 or exc.detail:
            log.warning("request failed: %s %s", exc.status, exc)  # with the detail the client never sees
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    async def on_validation(request: Request, exc: RequestValidationError) -> Response:
        return await on_api_error(request, validation_error(exc))

    async def on_http(request: Request, exc: StarletteHTTPException) -> Response:
        error = APIError(str(exc.detail), code=None, headers=dict(exc.headers or {}))
        error.status = exc.status_code
        error.type = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return await on_api_error(request, error)

    async def on_disconnect(request: Request, exc: ClientDisconnected) -> Response:
        return Response(status_code=499)

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error")
        return JSONResponse(APIError("Internal server error").body(), status_code=500)

    app.add_exception_handler(APIError, on_api_error)  # type: ignore[arg-type]  # typed for Exception; ours take their own class
    app.add_exception_handler(RequestValidationError, on_validation)  # type: ignore[arg-type]  # typed for Exception; ours take their own class
    app.add_exception_handler(StarletteHTTPException, on_http)  # type: ignore[arg-type]  # typed for Exception; ours take their own class
    app.add_exception_handler(ClientDisconnected, on_disconnect)  # type: ignore[arg-type]  # typed for Exception; ours take their own class
    app.add_exception_handler(Exception, on_unexpected)
