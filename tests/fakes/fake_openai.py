"""A stand-in for an OpenAI-compatible chat server: ``POST /v1/chat/completions`` (not streamed).

Replies are OpenAI's ``chat.completion`` objects, ``{"id", "object", "created", "model", "choices":
[{"index", "message": {"role", "content"}, "finish_reason"}], "usage"}``; errors use OpenAI's
envelope ``{"error": {"message", "type", "param", "code"}}``. The normalized text of a request is
``replies[user text]`` (the user text itself when absent), sent as ``{"normalized": ...}``.

In tests: ``fake = FakeOpenAI(replies={"RM5": "five ringgit"}); await fake.start()``, point a client
at ``fake.url`` (``http://127.0.0.1:PORT/v1``), change ``fake.script`` between requests and read
``fake.requests`` (path, headers, JSON body).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass
class ChatScript:
    """How the fake answers the next chat completion requests."""

    status: int = 200  # not 200: answer with this status and OpenAI's error envelope
    reject_schema: bool = False  # answer 400 to a request that carries `response_format`
    delay_s: float = 0.0  # wait this long before answering
    content: str | None = None  # the message content verbatim; None: {"normalized": reply}
    plain_without_schema: bool = False  # without `response_format`, send the reply as plain text
    finish_reason: str = "stop"
    raw_body: str | None = None  # send this body verbatim (status 200), e.g. a malformed completion


@dataclass
class ChatRequest:
    """One request as the fake saw it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def user_text(self) -> str:
        return str(self.body["messages"][-1]["content"])

    @property
    def system_text(self) -> str:
        return str(self.body["messages"][0]["content"])


def openai_error(message: str, status: int) -> dict[str, Any]:
    """OpenAI's error envelope."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class FakeOpenAI:
    """The fake server; ``start`` binds 127.0.0.1 on a free port and sets ``url`` (ending in ``/v1``)."""

    def __init__(
        self,
        script: ChatScript | None = None,
        *,
        replies: dict[str, str] | None = None,
        model: str = "normalizer-model",
        api_key: str = "sk-test",
    ) -> None:
        self.script = script or ChatScript()
        self.replies = dict(replies or {})
        self.model = model
        self.api_key = api_key
        self.requests: list[ChatRequest] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}/v1"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _chat(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return web.json_response(openai_error("invalid JSON body", 400), status=400)
        self.requests.append(ChatRequest(request.path, dict(request.headers), body))
        script = self.script
        await asyncio.sleep(script.delay_s)
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response(openai_error("Incorrect API key provided", 401), status=401)
        if body.get("model") != self.model:
            error = openai_error(f"The model `{body.get('model')}` does not exist", 404)
            return web.json_response(error, status=404)
        if script.status != 200:
            return web.json_response(openai_error("fake failure", script.status), status=script.status)
        if script.reject_schema and "response_format" in body:
            error = openai_error("response_format json_schema is not supported", 400)
            return web.json_response(error, status=400)
        if script.raw_body is not None:
            return web.Response(text=script.raw_body, content_type="application/json")
        reply = self.replies.get(body["messages"][-1]["content"], body["messages"][-1]["content"])
        content = script.content
        if content is None:
            plain = script.plain_without_schema and "response_format" not in body
            content = reply if plain else json.dumps({"normalized": reply}, ensure_ascii=False)
        message = {"role": "assistant", "content": content}
        choice = {"index": 0, "message": message, "finish_reason": script.finish_reason}
        usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        completion = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion"}
        completion |= {"created": int(time.time()), "model": self.model, "choices": [choice], "usage": usage}
        return web.json_response(completion)
