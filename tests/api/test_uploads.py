"""UploadLimitMiddleware at the ASGI level: what it reads of a refused body, and what it passes on."""

from __future__ import annotations

import json

import pytest
from starlette.types import Message, Receive, Scope, Send

from app.api.uploads import FORM_OVERHEAD_BYTES, UploadLimitMiddleware, UploadTooLarge

LIMIT = 1000


def scope(path: str = "/v1/audio/vc", method: str = "POST", **headers: str) -> Scope:
    encoded = [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    return {"type": "http", "method": method, "path": path, "headers": encoded}


class Client:
    """Body parts to hand out, and what the app sent back."""

    def __init__(self, parts: int, part_size: int = 100_000) -> None:
        self.parts = [b"x" * part_size] * parts
        self.reads = 0
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        self.reads += 1
        body = self.parts.pop(0) if self.parts else b""
        return {"type": "http.request", "body": body, "more_body": bool(self.parts)}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    def status_and_error(self) -> tuple[int, dict[str, object]]:
        return self.sent[0]["status"], json.loads(self.sent[1]["body"])["error"]


async def never_called(scope: Scope, receive: Receive, send: Send) -> None:
    raise AssertionError("the app must not run")


async def reads_everything(scope: Scope, receive: Receive, send: Send) -> None:
    while (await receive()).get("more_body"):
        pass


async def test_declared_oversize_with_expect_continue_is_refused_without_reading() -> None:
    client = Client(parts=10)
    middleware = UploadLimitMiddleware(never_called, LIMIT)
    length = str(10 * 100_000)
    await middleware(scope(content_length=length, expect="100-continue"), client.receive, client.send)
    assert client.reads == 0
    status, error = client.status_and_error()
    assert status == 413 and error["code"] == "payload_too_large"


async def test_declared_oversize_is_drained_then_refused() -> None:
    client = Client(parts=10)
    middleware = UploadLimitMiddleware(never_called, LIMIT)
    await middleware(scope(content_length=str(10 * 100_000)), client.receive, client.send)
    assert client.reads == 10 and not client.parts, "read (and discarded) so the client sees the 413"
    assert client.status_and_error()[0] == 413


async def test_undeclared_oversize_raises_once_past_the_allowance() -> None:
    client = Client(parts=10)
    middleware = UploadLimitMiddleware(reads_everything, LIMIT)
    with pytest.raises(UploadTooLarge) as info:
        await middleware(scope(), client.receive, client.send)
    assert info.value.status_code == 413 and info.value.limit == LIMIT
    assert not client.parts, "the rest was drained"
    assert LIMIT + FORM_OVERHEAD_BYTES < 100_000 * 3


async def test_other_routes_and_small_bodies_pass() -> None:
    for request in (scope("/v1/audio/speech"), scope(method="GET"), scope(content_length="2000")):
        client = Client(parts=1, part_size=2000)
        await UploadLimitMiddleware(reads_everything, LIMIT)(request, client.receive, client.send)
        assert client.reads == 1 and not client.sent
