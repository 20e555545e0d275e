"""The request edge: body caps and timeouts, drained error answers and ``HEAD``, installed together.

Outermost first: ``HeadMiddleware`` (HEAD runs as GET), ``BodyTimeoutMiddleware`` (408 when a body
stalls), ``DrainMiddleware`` (an error answer waits for the rest of the body, so the client reads
it), ``BodyCapMiddleware`` (413 past MAX_JSON_BODY_BYTES on every non-upload route). The header-read
timeout, the header cap and the write-stall timeout live in the server's protocol
(``app.api.connection``), the upload cap in ``app.api.uploads``.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from app.api.body_cap import BodyCapMiddleware, BodyTooLarge, too_large
from app.api.body_timeout import BodyReadTimeout, BodyTimeoutMiddleware
from app.api.drain import DrainMiddleware
from app.api.head import HeadMiddleware
from app.core.errors import RequestTimeout
from app.core.routes import UPLOAD_PATHS
from app.core.settings import ServerSettings

CLOSE = {"Connection": "close"}


def install_edge(app: FastAPI, settings: ServerSettings) -> None:
    """Add the edge middlewares (outside those added before) and the handlers of their errors."""

    async def on_timeout(request: Request, exc: BodyReadTimeout) -> Response:
        error = RequestTimeout(str(exc.detail))
        return JSONResponse(error.body(), status_code=error.status, headers=CLOSE)

    async def on_too_large(request: Request, exc: BodyTooLarge) -> Response:
        error = too_large(exc.limit)
        return JSONResponse(error.body(), status_code=error.status, headers=CLOSE)

    app.add_middleware(BodyCapMiddleware, limit=settings.MAX_JSON_BODY_BYTES, exempt=UPLOAD_PATHS)
    app.add_middleware(DrainMiddleware)
    app.add_middleware(BodyTimeoutMiddleware, timeout_s=settings.BODY_READ_TIMEOUT_S)
    app.add_middleware(HeadMiddleware)
    app.add_exception_handler(BodyReadTimeout, on_timeout)  # type: ignore[arg-type]  # typed for Exception; ours take their own class
    app.add_exception_handler(BodyTooLarge, on_too_large)  # type: ignore[arg-type]  # typed for Exception; ours take their own class
