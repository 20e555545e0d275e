"""Audio uploads: a request-body cap for the upload routes (reading a reference: ``synthesis.references``).

Starlette spools a multipart file to disk whole before a route runs, so the size cap has to act
earlier: ``UploadLimitMiddleware`` answers 413 from the ``Content-Length`` header alone, and counts the
bytes of a body sent without one, failing it as soon as it passes the cap (``UploadTooLarge``, which
the installed handler turns into the OpenAI error body). The route then checks the file part itself
against ``MAX_UPLOAD_BYTES`` while reading it, before anything is decoded.

A client that is still sending when the answer comes would see a connection reset instead of the
413 (the server closes a connection with unread data), so the rest of a refused body is read and
discarded first, up to ``DRAIN_BYTES``; nothing is stored. A client that sent ``Expect:
100-continue`` (curl does for large uploads) gets the 413 at once and never sends the body.
"""

from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.drain import DRAIN_BYTES, BodyProgress, drain
from app.core.errors import PayloadTooLarge
from app.core.routes import UPLOAD_PATHS

FORM_OVERHEAD_BYTES = 256 * 1024
"""Room for the text fields and multipart framing on top of the file itself."""


class UploadTooLarge(HTTPException):
    """Raised from the request body stream once it passes the cap (FastAPI re-raises HTTPExceptions)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the {limit}-byte upload limit")
        self.limit = limit


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"The upload is larger than the {limit}-byte limit.", code="payload_too_large")


class UploadLimitMiddleware:
    """Caps request bodies of POSTs to the upload routes at ``max_file_bytes`` + form overhead."""

    def __init__(self, app: ASGIApp, max_file_bytes: int) -> None:
        self.app = app
        self.max_file_bytes = max_file_bytes
        self.limit = max_file_bytes + FORM_OVERHEAD_BYTES

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in UPLOAD_PATHS:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            if headers.get(b"expect", b"").lower() != b"100-continue":
                await drain(receive, BodyProgress(expects_continue=False), DRAIN_BYTES)
            error = _too_large(self.max_file_bytes)
            response = JSONResponse(error.body(), status_code=error.status, headers={"Connection": "close"})
            await response(scope, receive, send)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    if message.get("more_body", False):
                        await drain(receive, BodyProgress(expects_continue=False), DRAIN_BYTES)
                    raise UploadTooLarge(self.max_file_bytes)
            return message

        await self.app(scope, counting_receive, send)


def install_upload_limit(app: FastAPI, max_file_bytes: int) -> None:
    """Add the middleware and the handler that turns ``UploadTooLarge`` into a 413 OpenAI error."""

    async def on_too_large(request: Request, exc: UploadTooLarge) -> Response:
        error = _too_large(exc.limit)
        return JSONResponse(error.body(), status_code=error.status, headers={"Connection": "close"})

    app.add_middleware(UploadLimitMiddleware, max_file_bytes=max_file_bytes)
    app.add_exception_handler(UploadTooLarge, on_too_large)  # type: ignore[arg-type]  # typed for Exception; ours take their own class
