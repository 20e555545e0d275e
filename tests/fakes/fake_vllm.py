"""A stand-in for vLLM's OpenAI server: ``POST /v1/completions`` (SSE), ``GET /health``, ``GET /v1/models``.

The stream is vLLM's, field for field: one ``data: {chunk}`` line and a blank line per event, each chunk
``{"id", "object": "text_completion", "created", "model", "choices": [{"index", "text", "logprobs",
"finish_reason", "stop_reason"}], "usage": null}``; with ``finish_reason`` "length" the last tokens
come in the finishing chunk, with "stop" (EOS, whose text is not sent) a last chunk has empty text;
then ``data: [DONE]``. Errors use vLLM's envelope ``{"error": {"message", "type", "param", "code"}}``.

In tests: ``fake = FakeVLLM(Script(codes=[1, 2, 3], tokens_per_event=2)); await fake.start()``, point a
client at ``fake.url``, change ``fake.script`` between requests, read ``fake.requests`` (bodies,
headers, whether and when the client disconnected). Standalone, for demos and benchmarks:
``python -m tests.fakes.fake_vllm --port 9093 --tokens-per-s 100`` serves random codes, about 12 per
word of the prompt's text, capped by ``max_tokens``, the same codes for the same prompt. A paced
stream (``tokens_per_s``) sends token k at ``k / tokens_per_s`` after its first, on a fixed timeline
(a late event does not delay the later ones), as each row of a served model does. ``--control`` adds
``PUT /fake/script`` to change the pace of the next requests (and the codes per word).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

TOKENS_PER_WORD = 12


@dataclass
class Script:
    """How the fake answers the next completion requests. Event counts are 0-based positions."""

    codes: list[int] | None = None  # None: random codes, ``tokens_per_word`` per word of the prompt's text
    tokens_per_word: int = TOKENS_PER_WORD
    tokens_per_event: int = 1
    tokens_per_s: float | None = None  # pace; None: as fast as possible
    first_token_delay_s: float = 0.0
    finish_reason: Literal["stop", "length"] = "stop"  # "length" is also forced by max_tokens
    split_token: int | None = None  # the text of this token is cut across two events
    status: int = 200  # not 200: answer with this status and `error_body`
    error_body: str | dict[str, Any] | None = None  # None: vLLM's envelope around "fake failure"
    drop_after_events: int | None = None  # abort the TCP connection after this many events
    malformed_after_events: int | None = None  # send a cut-off JSON line after this many events
    error_after_events: int | None = None  # send vLLM's mid-stream error event, then [DONE]
    stall_after_events: int | None = None  # wait `stall_s` before the next event
    stall_s: float = 0.0
    end_without_done: bool = False  # end the body cleanly, with no finish_reason and no [DONE]
    keepalive_comments: bool = False  # send an SSE comment line before each event


@dataclass
class RecordedRequest:
    """One ``/v1/completions`` request as the fake saw it."""

    body: dict[str, Any]
    headers: dict[str, str]
    received_at: float  # time.monotonic()
    peer: tuple[str, int] | None  # the client's address: the same for requests on a reused connection
    events_sent: int = 0
    completed: bool = False  # the whole answer was written
    disconnected_at: float | None = None  # time.monotonic() when the client went away early
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)


def vllm_error(message: str, status: int, err_type: str = "BadRequestError") -> dict[str, Any]:
    """vLLM's error envelope (``ErrorResponse(error=ErrorInfo(...))``)."""
    return {"error": {"message": message, "type": err_type, "param": None, "code": status}}


def random_codes(prompt: str, max_tokens: int, seed: int = 0, per_word: int = TOKENS_PER_WORD) -> list[int]:
    """A plausible utterance for ``prompt``: ``per_word`` codes per word of the last turn's text."""
    turn = prompt.rsplit("<|im_start|>", 1)[-1].split("<|speech_start|>", 1)[0]
    words = len(turn.split(": ", 1)[-1].split())
    rng = random.Random(f"{seed}:{prompt}")
    count = min(max(per_word, per_word * words), max_tokens)
    return [rng.randrange(65536) for _ in range(count)]


def prompt_token_count(prompt: str) -> int:
    """The fake's stand-in for a tokenizer: special tokens count one each, other text 4 chars a token."""
    specials = re.findall(r"<\|[^|]*\|>", prompt)
    text = re.sub(r"<\|[^|]*\|>", "", prompt)
    return len(specials) + -(-len(text) // 4)


class FakeVLLM:
    """The fake server; ``start`` binds 127.0.0.1 on a free port (or ``port``) and sets ``url``."""

    def __init__(
        self,
        script: Script | None = None,
        *,
        model: str = "TTS-model",
        api_key: str | None = None,
        seed: int = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        control: bool = False,
    ) -> None:
        self.script = script or Script()
        self.control = control  # serve PUT /fake/script (a benchmark changes the pace between runs)
        self.model = model
        self.api_key = api_key  # when set, /v1 routes answer 401 without `Authorization: Bearer <key>`
        self.healthy = True  # False: /health answers 503
        self.seed = seed
        self.requests: list[RecordedRequest] = []
        self.url = ""
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        if self.control:
            app.router.add_put("/fake/script", self._set_script)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def wait_disconnected(self, index: int = -1, timeout: float = 1.0) -> float:
        """Wait until the client of request ``index`` has gone away; return when (monotonic). A client
        that gave up fast (a short timeout on a loaded machine) may leave before its request is handled,
        so the request is first waited for too, within the same ``timeout``."""
        deadline = time.monotonic() + timeout
        while len(self.requests) <= (index if index >= 0 else -index - 1):
            if time.monotonic() > deadline:
                raise TimeoutError(f"request {index} never reached the fake vLLM")
            await asyncio.sleep(0.01)
        request = self.requests[index]
        await asyncio.wait_for(request.disconnected.wait(), max(deadline - time.monotonic(), 0.0))
        assert request.disconnected_at is not None
        return request.disconnected_at

    async def _set_script(self, request: web.Request) -> web.Response:
        """Replace the script's pace: a JSON object of ``tokens_per_s``, ``tokens_per_event``,
        ``first_token_delay_s``, ``tokens_per_word`` (the fields given; the others keep their values)."""
        body = await request.json()
        allowed = {"tokens_per_s", "tokens_per_event", "first_token_delay_s", "tokens_per_word"}
        if not isinstance(body, dict) or set(body) - allowed:
            return web.json_response(vllm_error(f"fields must be among {sorted(allowed)}", 400), status=400)
        for name, value in body.items():
            setattr(self.script, name, value)
        return web.json_response({name: getattr(self.script, name) for name in sorted(allowed)})

    async def _health(self, _request: web.Request) -> web.Response:
        return web.Response(status=200 if self.healthy else 503)

    async def _models(self, request: web.Request) -> web.Response:
        if denied := self._check_auth(request):
            return denied
        card = {"id": self.model, "object": "model", "created": int(time.time()), "owned_by": "vllm"}
        card |= {"root": self.model, "parent": None, "max_model_len": 4096}
        return web.json_response({"object": "list", "data": [card]})

    def _check_auth(self, request: web.Request) -> web.Response | None:
        if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        return None

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        if denied := self._check_auth(request):
            return denied
        try:
            body = await request.json()
        except ValueError:
            return web.json_response(vllm_error("invalid JSON body", 400), status=400)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        record = RecordedRequest(body, dict(request.headers), time.monotonic(), peer and tuple(peer[:2]))
        self.requests.append(record)
        script = self.script
        if body.get("model") != self.model:
            error = vllm_error(f"The model `{body.get('model')}` does not exist.", 404, "NotFoundError")
            return web.json_response(error, status=404)
        if script.status != 200:
            error = script.error_body
            if error is None:
                error = vllm_error("fake failure", script.status, "InternalServerError")
            if isinstance(error, dict):
                return web.json_response(error, status=script.status)
            return web.Response(text=error, status=script.status)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        try:
            await response.prepare(request)
            await self._stream(request, response, record, script)
        except (asyncio.CancelledError, ConnectionResetError):
            record.disconnected_at = time.monotonic()
            record.disconnected.set()
            raise
        return response

    async def _stream(
        self, request: web.Request, response: web.StreamResponse, record: RecordedRequest, script: Script
    ) -> None:
        body = record.body
        max_tokens = int(body.get("max_tokens") or 16)
        codes = script.codes
        if codes is None:
            codes = random_codes(body["prompt"], max_tokens, self.seed, script.tokens_per_word)
        finish = script.finish_reason
        if len(codes) >= max_tokens:
            codes, finish = codes[:max_tokens], "length"
        events = _event_texts(codes, script.tokens_per_event, script.split_token)
        chunk_id, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())

        def chunk(text: str, finish_reason: str | None) -> bytes:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
            choice["stop_reason"] = None
            data = {"id": chunk_id, "object": "text_completion", "created": created, "model": self.model}
            data |= {"choices": [choice], "usage": None}
            return f"data: {json.dumps(data)}\n\n".encode()

        await asyncio.sleep(script.first_token_delay_s)
        started, sent = time.monotonic(), 0  # paced on a fixed timeline: token k at started + k / rate
        for index, (text, tokens) in enumerate(events):
            if index == script.drop_after_events:
                assert request.transport is not None
                request.transport.abort()
                return
            if index == script.malformed_after_events:
                await response.write(b'data: {"id": "cmpl-1", "choices": [{"text": "<|s_1|>"\n\n')
            if index == script.error_after_events:
                error = vllm_error("fake failure during generation", 500, "InternalServerError")
                await response.write(f"data: {json.dumps(error)}\n\ndata: [DONE]\n\n".encode())
                record.completed = True
                return
            if index == script.stall_after_events:
                await asyncio.sleep(script.stall_s)
            if index and script.tokens_per_s:  # lateness never accumulates: no drift over an utterance
                due = started + (sent + tokens) / script.tokens_per_s
                await asyncio.sleep(max(0.0, due - time.monotonic()))
            sent += tokens
            if script.keepalive_comments:
                await response.write(b": keepalive\n\n")
            last = index == len(events) - 1
            await response.write(chunk(text, finish if last and finish == "length" else None))
            record.events_sent += 1
        if script.end_without_done:
            await response.write_eof()
            record.completed = True
            return
        if finish == "stop":
            await response.write(chunk("", "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            prompt_tokens = prompt_token_count(body["prompt"])
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(codes) + (finish == "stop")}
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            data = {"id": chunk_id, "object": "text_completion", "created": created, "model": self.model}
            await response.write(f"data: {json.dumps(data | {'choices': [], 'usage': usage})}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        record.completed = True


def _event_texts(codes: list[int], per_event: int, split_token: int | None) -> list[tuple[str, int]]:
    """``(text, token count)`` per event; ``split_token`` cuts that token's text across two events."""
    tokens = [f"<|s_{code}|>" for code in codes]
    events: list[tuple[str, int]] = []
    for start in range(0, len(tokens), max(1, per_event)):
        group = tokens[start : start + max(1, per_event)]
        if split_token is not None and start <= split_token < start + len(group):
            cut = sum(map(len, group[: split_token - start])) + len(tokens[split_token]) // 2
            text = "".join(group)
            events += [(text[:cut], split_token - start), (text[cut:], len(group) - split_token + start)]
        else:
            events.append(("".join(group), len(group)))
    return events


async def _serve(args: argparse.Namespace) -> None:
    fake = FakeVLLM(
        Script(tokens_per_s=args.tokens_per_s, tokens_per_event=args.tokens_per_event),
        model=args.model,
        seed=args.seed,
        host=args.host,
        port=args.port,
        control=args.control,
    )
    await fake.start()
    print(f"fake vLLM serving {args.model!r} on {fake.url}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9093)
    parser.add_argument("--tokens-per-s", type=float, default=100.0)
    parser.add_argument("--tokens-per-event", type=int, default=1)
    parser.add_argument("--model", default="TTS-model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--control", action="store_true", help="serve PUT /fake/script to change the pace")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
