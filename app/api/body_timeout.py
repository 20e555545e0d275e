"""A body-read timeout: a request whose body stalls is answered 408 and frees what it holds.

``TimedReceive`` wraps the ASGI ``receive`` of one request: while the body is incomplete, each wait
for its next part is limited to ``timeout_s``; past it ``BodyReadTimeout`` is raised where the body
is being read (FastAPI re-raises HTTPExceptions from there), and the error handler answers 408 with
the OpenAI error body and ``Connection: close``. The route then returns, so the middlewares around
it release what they hold (the admission slot among them). Once the body is complete, ``receive`` is
passed through untouched (it then only reports a disconnect, which may take as long as it likes).
"""

from __future__ import annotations

import asyncio

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyReadTimeout(HTTPException):
    """Raised from ``receive`` when the next part of the body did not come within ``timeout_s``."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(408, f"The request body stalled: no data for {timeout_s:g} s.")
        self.timeout_s = timeout_s


class TimedReceive:
    """``receive`` with a per-part deadline until the request body is complete."""

    def __init__(self, receive: Receive, timeout_s: float) -> None:
        self._receive = receive
        self.timeout_s = timeout_s
        self.body_complete = False

    async def __call__(self) -> Message:
        if self.body_complete:
            return await self._receive()
        try:
            async with asyncio.timeout(self.timeout_s):
                message = await self._receive()
        except TimeoutError:
            raise BodyReadTimeout(self.timeout_s) from None
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.body_complete = True
        return message


class BodyTimeoutMiddleware:
    """Gives every HTTP request a ``TimedReceive``."""

    def __init__(self, app: ASGIApp, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.app(scope, TimedReceive(receive, self.timeout_s), send)
