"""Speech tokens from a vLLM server: ``POST /v1/completions`` with ``stream: true``, read as SSE.

The wire format (vLLM's OpenAI-compatible server): each event is one ``data: {json}`` line and a blank
line; the JSON is a ``text_completion`` chunk whose ``choices[0].text`` is the new text and whose
``choices[0].finish_reason`` is set on the last chunk; ``data: [DONE]`` ends the body. An error during
generation arrives as ``data: {"error": {...}}`` before ``[DONE]``.

Strictness, decided here: a data line that is not valid JSON, or a stream that ends without saying why
(no finish reason), raises ``BackendError`` instead of being skipped: either means lost speech tokens,
which would play as a silent cut. SSE comments (``:`` lines) and other fields are ignored.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError
from yarl import URL

from app.core.errors import APIError, BackendError, BackendTimeout, InvalidRequest, Unavailable
from app.core.types import FinishReason
from app.families.neucodec.lm.types import GenerationParams
from app.families.neucodec.speech_tokens import SpeechTokenError, SpeechTokenParser
from app.observability.tracing import NOOP_SPAN, SpanLike, span, start_span

HEALTH_TIMEOUT_S = 2.0
_MAX_LINE = 1 << 20  # one SSE line; vLLM's are ~15 bytes per token
_MAX_QUOTE = 300  # characters of a backend's message kept in the log
MALFORMED = "The LM backend sent a malformed event."
REFUSED = (
    "The LM backend refused the request: the prompt and max_tokens do not fit the model's context window, "
    "or a sampling parameter is out of its range."
)


def backend_urls(base_url: str) -> tuple[URL, URL]:
    """The completions and health URLs for a base URL.

    ``base_url`` may be the server root (``http://h:8000``), its API root (``http://h:8000/v1``) or the
    endpoint itself (``.../v1/completions``), with or without a trailing slash and behind a path prefix
    (``http://proxy/tts``). vLLM serves ``/health`` at the root, beside ``/v1``.
    """
    url = URL(base_url)
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"LM backend URL must be http(s)://host[:port][/path], got {base_url!r}")
    segments = [part for part in url.parts[1:] if part]
    if segments[-2:] == ["v1", "completions"]:
        segments = segments[:-2]
    elif segments[-1:] == ["v1"]:
        segments = segments[:-1]
    root = url.with_path("/" + "/".join(segments), encoded=False).with_query(None).with_fragment(None)
    return root / "v1" / "completions", root / "health"


def error_message(body: str) -> str:
    """The human message in a backend's error body: vLLM's ``{"error": {"message"}}``, the older
    ``{"object": "error", "message"}``, ``{"error": "text"}``, or the body text itself."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    message = _error_text(data) if isinstance(data, dict) else None
    text = message if message is not None else body.strip() or "(empty body)"
    return text[:_MAX_QUOTE]


def _error_text(data: dict[str, Any]) -> str | None:
    """The message of an error envelope, or None when ``data`` is not one."""
    if "error" in data:
        error = data["error"]
        if isinstance(error, dict):
            return str(error.get("message") or error)
        return str(error)
    if data.get("object") == "error" or "message" in data:
        return str(data.get("message"))
    return None


def _parse_chunk(payload: str) -> tuple[str, str | None, int | None]:
    """``(text, finish_reason, prompt_tokens)`` of one ``text_completion`` chunk; BackendError otherwise.

    ``prompt_tokens`` comes from the usage-only chunk that ``stream_options.include_usage`` asks for.
    """
    try:
        data = json.loads(payload)
    except ValueError:
        raise BackendError(MALFORMED, detail=f"malformed event: {payload[:100]!r}") from None
    if not isinstance(data, dict):
        raise BackendError(MALFORMED, detail=f"malformed event: {payload[:100]!r}")
    message = _error_text(data)
    if message is not None:
        raise BackendError("The LM backend failed during generation.", detail=message[:_MAX_QUOTE])
    choices = data.get("choices")
    if not isinstance(choices, list):
        raise BackendError(MALFORMED, detail=f"an event without choices: {payload[:100]!r}")
    if not choices:  # a usage-only chunk (stream_options.include_usage)
        usage = data.get("usage")
        prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        return "", None, prompt_tokens if isinstance(prompt_tokens, int) else None
    choice = choices[0]
    text = choice.get("text") if isinstance(choice, dict) else None
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    if not isinstance(text, str) or not (finish is None or isinstance(finish, str)):
        raise BackendError(MALFORMED, detail=f"malformed choice: {payload[:100]!r}")
    return text, finish, None


def _data_payload(line: bytes) -> str | None:
    """The payload of an SSE ``data:`` line; None for blank lines, comments and other fields."""
    if not line.startswith(b"data:"):
        return None
    payload = line[5:].rstrip(b"\r\n")
    if payload.startswith(b" "):
        payload = payload[1:]
    return payload.decode("utf-8", errors="replace")


class HttpTokenSource:
    """A ``TokenSource`` backed by a vLLM (or compatible) server's streaming completions API.

    One ``aiohttp.ClientSession`` (opened in ``start``, closed in ``close``) carries every request; its
    connection pool is unbounded because vLLM queues requests itself. Timeouts: ``connect_timeout_s``
    for the TCP connect, ``first_token_timeout_s`` from sending the request to the first event,
    ``token_timeout_s`` for any later wait between events; each raises ``BackendTimeout``.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        connect_timeout_s: float,
        first_token_timeout_s: float,
        token_timeout_s: float,
        name: str = "http",
    ) -> None:
        self.name = name
        self.completions_url, self.health_url = backend_urls(base_url)
        self._api_key = api_key
        self._connect_timeout_s = connect_timeout_s
        self._first_token_timeout_s = first_token_timeout_s
        self._token_timeout_s = token_timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        """Open the shared HTTP session (idempotent)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout_s),
            )

    async def close(self) -> None:
        """Close the session and every connection it holds."""
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    async def ready(self) -> bool:
        """True when the backend's ``/health`` answers 200 within ``HEALTH_TIMEOUT_S``; never raises."""
        if self._session is None:
            return False
        try:
            async with self._session.get(
                self.health_url,
                headers=self._auth_headers(),
                timeout=aiohttp.ClientTimeout(total=HEALTH_TIMEOUT_S),
            ) as response:
                return response.status == 200
        except (aiohttp.ClientError, TimeoutError, OSError):
            return False

    def generate(self, params: GenerationParams) -> HttpTokenStream:
        """A stream for one generation; the request is sent on the first iteration."""
        if self._session is None:
            raise Unavailable(f"LM source {self.name!r} is not started")
        body: dict[str, Any] = {
            "model": params.model,
            "prompt": params.prompt,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "repetition_penalty": params.repetition_penalty,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        for key in ("top_p", "top_k", "seed"):
            value = getattr(params, key)
            if value is not None:
                body[key] = value
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream", **self._auth_headers()}
        return HttpTokenStream(
            self._session,
            self.completions_url,
            headers,
            json.dumps(body).encode(),
            first_token_timeout_s=self._first_token_timeout_s,
            token_timeout_s=self._token_timeout_s,
        )

    def _auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}


class HttpTokenStream:
    """One streaming completion: iterate for code deltas, ``aclose`` to abort.

    The HTTP response is closed (not returned to the pool) whenever the stream ends early, by
    ``aclose``, by cancellation of the consuming task or by an error, so vLLM sees the disconnect and
    aborts the generation.
    """

    finish_reason: FinishReason | None
    prompt_tokens: int | None

    def __init__(
        self,
        session: aiohttp.ClientSession,
        url: URL,
        headers: dict[str, str],
        body: bytes,
        *,
        first_token_timeout_s: float,
        token_timeout_s: float,
    ) -> None:
        self.finish_reason = None
        self.prompt_tokens = None
        self._session = session
        self._url = url
        self._headers = headers
        self._body = body
        self._first_token_timeout_s = first_token_timeout_s
        self._token_timeout_s = token_timeout_s
        self._response: aiohttp.ClientResponse | None = None
        self._closing = False
        self._deltas = self._run()

    def __aiter__(self) -> AsyncIterator[list[int]]:
        return self

    async def __anext__(self) -> list[int]:
        return await self._deltas.__anext__()

    async def aclose(self) -> None:
        """Abort: close the upstream connection now. Safe to call twice or from another task."""
        self._closing = True
        if self.finish_reason is None:
            self.finish_reason = "cancelled"
        if self._response is not None:
            self._response.close()
        # While another task is inside __anext__, the closed connection ends that iteration instead.
        if not self._deltas.ag_running:  # type: ignore[attr-defined]  # async generator objects have it; the ABC does not declare it
            await self._deltas.aclose()

    async def _run(self) -> AsyncGenerator[list[int], None]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._first_token_timeout_s
        waiting_for = "first token"
        parser = SpeechTokenParser()
        finish: str | None = None
        done = False
        generation = start_span("lm.generate", {"lm.url": str(self._url)})
        first_token: SpanLike = NOOP_SPAN
        deltas = 0
        try:
            async with asyncio.timeout_at(deadline):
                with span("lm.connect", parent=generation.context):
                    response = await self._open()
            first_token = start_span("lm.first_token", parent=generation.context)
            while not done and not self._closing:
                try:
                    async with asyncio.timeout_at(deadline):
                        line = await response.content.readline(max_line_length=_MAX_LINE)
                except TimeoutError:
                    if finish is not None:
                        break  # every token is in; only the [DONE] line is late
                    raise
                if not line:
                    break
                payload = _data_payload(line)
                if payload is None:
                    continue
                if payload == "[DONE]":
                    done = True
                    break
                text, finish_now, prompt_tokens = _parse_chunk(payload)
                finish = finish_now or finish
                self.prompt_tokens = prompt_tokens if prompt_tokens is not None else self.prompt_tokens
                try:
                    codes = parser.feed(text)
                except SpeechTokenError as exc:
                    raise BackendError(f"LM backend sent an invalid speech token: {exc}") from None
                if codes:
                    if not deltas:
                        first_token.end()
                    deltas += 1
                    yield codes
                deadline = loop.time() + self._token_timeout_s
                waiting_for = "next token"
            if not self._closing:
                self.finish_reason = _finish_reason(finish, done)
        except aiohttp.ConnectionTimeoutError:
            self.finish_reason = "error"
            raise BackendTimeout(
                "The LM backend did not accept the connection in time.", detail=f"backend {self._url}"
            ) from None
        except TimeoutError:
            self.finish_reason = "error"
            raise BackendTimeout(f"LM backend sent no {waiting_for} in time") from None
        except (aiohttp.ClientError, HttpProcessingError, OSError) as exc:
            if self._closing:
                return
            self.finish_reason = "error"
            raise BackendError("The LM backend connection failed.", detail=repr(exc)) from None
        except APIError:
            self.finish_reason = "error"
            raise
        finally:
            if self.finish_reason is None:
                self.finish_reason = "cancelled"
            if self._response is not None:
                if self.finish_reason in ("stop", "length") and done:
                    self._response.release()
                else:
                    self._response.close()
            if not deltas:
                first_token.end()
            generation.set({"lm.deltas": deltas, "lm.finish_reason": self.finish_reason})
            generation.end()

    async def _open(self) -> aiohttp.ClientResponse:
        """Send the request; return the response once it is known to be a 200."""
        response = await self._session.post(self._url, data=self._body, headers=self._headers)
        self._response = response
        if response.status != 200:
            body = await response.text(errors="replace")
            detail = f"HTTP {response.status}: {error_message(body)}"
            if response.status == 400:  # vLLM's answer to a request it cannot serve: the client's mistake
                raise InvalidRequest(REFUSED, code="backend_refused_request", detail=detail)
            raise BackendError(f"The LM backend returned HTTP {response.status}.", detail=detail)
        return response


def _finish_reason(finish: str | None, done: bool) -> FinishReason:
    """Check how a stream ended: it must have said why, with a reason we understand."""
    if finish == "stop":
        return "stop"
    if finish == "length":
        return "length"
    if finish is not None:
        raise BackendError(f"LM backend ended the generation with finish_reason {finish!r}")
    if done:
        raise BackendError("LM backend ended the stream without a finish_reason")
    raise BackendError("LM backend closed the stream before it finished")
