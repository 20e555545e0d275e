"""``HEAD`` wherever ``GET`` works: the GET route answers, its headers are sent and its body is not.

FastAPI routes declared with ``GET`` answer ``HEAD`` with 405; load balancers and uptime checkers
probe with ``HEAD``. This middleware runs a ``HEAD`` request as a ``GET`` and drops the body bytes
(the headers, ``Content-Length`` included, stay those of the GET, as RFC 9110 asks).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadMiddleware:
    """Serves ``HEAD`` with the ``GET`` route, body omitted."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_headers_only)
