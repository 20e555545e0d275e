"""A size cap on the bodies of the non-upload routes (JSON), enforced before the body is buffered.

``BodyCap`` is the decision: a declared ``Content-Length`` over the cap is refused before a byte of
the body is read; a body without one is counted as it arrives and refused as soon as it passes the
cap (``BodyTooLarge``, raised where the body is read; FastAPI re-raises HTTPExceptions, and the error
handler answers 413 with the OpenAI error body). ``DrainMiddleware`` reads the rest of a refused
body so that the client sees the answer. The upload routes have their own, larger cap
(``app.api.uploads``).
"""

from __future__ import annotations

from fastapi import HTTPException
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.errors import PayloadTooLarge


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` once a body passes its cap."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is larger than the {limit}-byte limit.")
        self.limit = limit


def too_large(limit: int) -> PayloadTooLarge:
    """The OpenAI error for a body over ``limit`` bytes."""
    return PayloadTooLarge(f"The request body is larger than the {limit}-byte limit.")


class BodyCap:
    """Counts one request's body against ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.received = 0

    def declared_too_large(self, headers: list[tuple[bytes, bytes]]) -> bool:
        """True when the ``Content-Length`` header alone exceeds the cap."""
        declared = dict(headers).get(b"content-length", b"")
        return declared.isdigit() and int(declared) > self.limit

    def add(self, message: Message) -> None:
        """Count a received message; BodyTooLarge once the body has passed the cap."""
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                raise BodyTooLarge(self.limit)


class BodyCapMiddleware:
    """Caps request bodies at ``limit`` bytes on every path but ``exempt`` (the upload routes)."""

    def __init__(self, app: ASGIApp, limit: int, exempt: frozenset[str]) -> None:
        self.app = app
        self.limit = limit
        self.exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.exempt:
            await self.app(scope, receive, send)
            return
        cap = BodyCap(self.limit)
        if cap.declared_too_large(scope["headers"]):
            error = too_large(self.limit)
            response = JSONResponse(error.body(), status_code=error.status, headers={"Connection": "close"})
            await response(scope, receive, send)
            return

        async def capped_receive() -> Message:
            message = await receive()
            cap.add(message)
            return message

        await self.app(scope, capped_receive, send)
