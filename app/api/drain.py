"""Error answers that the client can read: the unread rest of a refused body is drained first.

A server that answers before reading the whole request body and then closes the connection makes
the kernel reset it while the client is still writing, so a client that sends its whole body before
reading (most do) sees a connection reset instead of the status. This happens to every early
refusal: a multipart body with too many fields or a huge field or file name (Starlette's parser
stops at the first offence), a 401, a 413, a 429. ``DrainMiddleware`` watches each request's body;
when an error response (status >= 400) starts while the body is unfinished, it first reads and
discards the rest, up to ``budget`` bytes (nothing is stored), then sends the response. A body that
is larger, stalls (the body-read timeout), or was never sent (``Expect: 100-continue`` and nothing
read yet) is not waited for: the response goes out with ``Connection: close``.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

DRAIN_BYTES = 64 * 1024 * 1024
"""Most of an unread body read (and discarded) before an error response."""


class BodyProgress:
    """How far one request's body has been read."""

    def __init__(self, expects_continue: bool) -> None:
        self.expects_continue = expects_continue
        self.started = False
        self.complete = False

    def saw(self, message: Message) -> None:
        """Record a message from ``receive``."""
        if message["type"] == "http.request":
            self.started = True
            self.complete = not message.get("more_body", False)
        else:  # http.disconnect: nothing more will come
            self.complete = True

    def should_drain(self) -> bool:
        """An unfinished body the client is (or may be) sending."""
        return not self.complete and (self.started or not self.expects_continue)


async def drain(receive: Receive, progress: BodyProgress, budget: int) -> bool:
    """Read (from ``receive``, noting each message in ``progress``) and discard the body up to
    ``budget`` bytes; True when it ended within them."""
    try:
        while not progress.complete:
            message = await receive()
            progress.saw(message)
            budget -= len(message.get("body", b""))
            if budget < 0 and not progress.complete:
                return False
    except Exception:  # a stalled (timed-out) or broken body: stop reading it
        return False
    return True


class DrainMiddleware:
    """Drains an unfinished request body before an error response starts (see the module docstring)."""

    def __init__(self, app: ASGIApp, budget: int = DRAIN_BYTES) -> None:
        self.app = app
        self.budget = budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        expects = dict(scope["headers"]).get(b"expect", b"").lower() == b"100-continue"
        progress = BodyProgress(expects)

        async def tracked_receive() -> Message:
            message = await receive()
            progress.saw(message)
            return message

        async def draining_send(message: Message) -> None:
            failing = message["type"] == "http.response.start" and message["status"] >= 400
            if failing and not progress.complete:
                drained = progress.should_drain() and await drain(receive, progress, self.budget)
                if not drained:
                    message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        await self.app(scope, tracked_receive, draining_send)
