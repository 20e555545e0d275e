"""The edge's plain parts on their own: body timeout, body cap, drain, HEAD and the header deadline."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from app.api.body_cap import BodyCap, BodyCapMiddleware, BodyTooLarge
from app.api.body_timeout import BodyReadTimeout, TimedReceive
from app.api.connection import TIMEOUT_RESPONSE, ConnectionGuard, ConnectionLimits
from app.api.drain import BodyProgress, DrainMiddleware, drain
from app.api.head import HeadMiddleware


def part(body: bytes, more: bool) -> Message:
    return {"type": "http.request", "body": body, "more_body": more}


class Body:
    """Hands out body parts; None in the list means "stall forever"."""

    def __init__(self, *parts: Message | None) -> None:
        self.parts = list(parts)
        self.reads = 0

    async def receive(self) -> Message:
        self.reads += 1
        nxt = self.parts.pop(0) if self.parts else {"type": "http.disconnect"}
        if nxt is None:
            await asyncio.sleep(3600)
        assert nxt is not None
        return nxt


def scope(method: str = "POST", path: str = "/v1/audio/speech", **headers: str) -> Scope:
    encoded = [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    return {"type": "http", "method": method, "path": path, "headers": encoded}


async def test_timed_receive_times_out_a_stalled_body_and_then_passes_through() -> None:
    stalled = TimedReceive(Body(part(b"{", True), None).receive, timeout_s=0.05)
    assert (await stalled())["body"] == b"{"
    with pytest.raises(BodyReadTimeout) as info:
        await stalled()
    assert info.value.status_code == 408
    done = TimedReceive(Body(part(b"{}", False), None).receive, timeout_s=0.05)
    await done()
    assert done.body_complete
    with pytest.raises(TimeoutError):  # after the body, waiting (for a disconnect) is not limited
        async with asyncio.timeout(0.2):
            await done()


def test_body_cap_declared_and_counted() -> None:
    cap = BodyCap(10)
    assert cap.declared_too_large([(b"content-length", b"11")])
    assert not cap.declared_too_large([(b"content-length", b"10")])
    assert not cap.declared_too_large([(b"content-length", b"-5")])
    cap.add(part(b"x" * 10, True))
    with pytest.raises(BodyTooLarge):
        cap.add(part(b"x", False))


async def test_body_cap_exempts_the_upload_routes() -> None:
    seen: list[int] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(len((await receive())["body"]))

    middleware = BodyCapMiddleware(app, limit=10, exempt=frozenset({"/v1/audio/vc"}))
    await middleware(scope(path="/v1/audio/vc"), Body(part(b"x" * 100, False)).receive, _no_send)
    assert seen == [100]
    with pytest.raises(BodyTooLarge):
        await middleware(scope(), Body(part(b"x" * 100, False)).receive, _no_send)


async def _no_send(message: Message) -> None:
    raise AssertionError("nothing may be sent")


async def test_drain_reads_to_the_end_or_gives_up_past_the_budget() -> None:
    progress = BodyProgress(expects_continue=False)
    body = Body(*(part(b"x" * 100, True) for _ in range(5)), part(b"", False))
    assert await drain(body.receive, progress, budget=1000) and progress.complete and body.reads == 6
    progress = BodyProgress(expects_continue=False)
    assert not await drain(Body(*(part(b"x" * 100, True) for _ in range(50))).receive, progress, budget=1000)


class Sent:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def __call__(self, message: Message) -> None:
        self.messages.append(message)

    def headers(self) -> dict[bytes, bytes]:
        return dict(self.messages[0].get("headers", []))


async def refuse_at_once(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 400, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


@pytest.mark.parametrize(
    ("parts", "expect", "reads", "closes"),
    [
        ([part(b"x", True), part(b"x", True), part(b"", False)], "", 3, False),  # drained, kept alive
        ([part(b"x" * 100, True)] * 20, "", 11, True),  # over the budget: closed
        ([None], "", 1, True),  # stalls: given up (the body timeout raises into drain)
        ([part(b"x", True)], "100-continue", 0, True),  # never asked for: not waited for
    ],
)
async def test_drain_middleware_before_an_error(
    parts: list[Message | None], expect: str, reads: int, closes: bool
) -> None:
    body = Body(*parts)
    receive = TimedReceive(body.receive, timeout_s=0.05)
    sent = Sent()
    await DrainMiddleware(refuse_at_once, budget=1000)(scope(expect=expect), receive, sent)
    assert body.reads == reads
    assert (sent.headers().get(b"connection") == b"close") is closes
    assert sent.messages[0]["status"] == 400


async def test_head_runs_the_get_route_without_its_body() -> None:
    methods: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        methods.append(scope["method"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]})
        await send({"type": "http.response.body", "body": b"ab", "more_body": True})
        await send({"type": "http.response.body", "body": b"cd"})

    sent = Sent()
    await HeadMiddleware(app)(scope("HEAD", "/health"), Body().receive, sent)
    assert methods == ["GET"]
    assert sent.messages == [
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]},
        {"type": "http.response.body", "body": b"", "more_body": False},
    ]


class FakeTransport:
    def __init__(self) -> None:
        self.written = b""
        self.closed = False

    def is_closing(self) -> bool:
        return self.closed

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True


class Cycle:
    response_complete = False


class Connection(ConnectionGuard):
    """ConnectionGuard's header deadline on a fake connection: ``cycle`` is what a uvicorn protocol would
    set."""

    def __init__(self, timeout_s: float) -> None:
        self.limits = ConnectionLimits(header_timeout_s=timeout_s, max_header_bytes=65536, write_stall_s=30)
        self.loop = asyncio.get_running_loop()
        self.transport: Any = FakeTransport()
        self.cycle: Any = None


async def test_header_deadline_answers_408_only_to_a_connection_still_waiting_for_headers() -> None:
    partial = Connection(0.05)
    partial._arm()
    partial._bytes_since_armed = True
    await asyncio.sleep(0.1)
    assert partial.transport.closed and partial.transport.written == TIMEOUT_RESPONSE
    body = json.loads(TIMEOUT_RESPONSE.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == "request_timeout"

    idle = Connection(0.05)
    idle._arm()
    await asyncio.sleep(0.1)
    assert idle.transport.closed and idle.transport.written == b""

    answering = Connection(0.05)
    answering._arm()
    answering.cycle = Cycle()  # headers complete, a response in progress
    await asyncio.sleep(0.1)
    assert not answering.transport.closed

    finished = Connection(0.05)
    finished._arm()
    finished._disarm()
    await asyncio.sleep(0.1)
    assert not finished.transport.closed
