"""HttpTokenSource against the fake vLLM server: wire format, every failure mode, timeouts, aborts."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from app.core.errors import BackendError, BackendTimeout, Unavailable
from app.families.neucodec.lm.http_source import HttpTokenSource, backend_urls, error_message
from app.families.neucodec.lm.types import GenerationParams, TokenStream
from tests.fakes.fake_vllm import FakeVLLM, Script, prompt_token_count

MODEL = "TTS-model"
PARAMS = GenerationParams(
    prompt="<|im_start|>jenny: Hello there, how are you?<|speech_start|>",
    model=MODEL,
    max_tokens=500,
    temperature=0.7,
    repetition_penalty=1.1,
)
TIMEOUTS = {"connect_timeout_s": 1.0, "first_token_timeout_s": 1.0, "token_timeout_s": 1.0}


@pytest.fixture
async def fake() -> AsyncIterator[FakeVLLM]:
    server = FakeVLLM(model=MODEL)
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def source(fake: FakeVLLM) -> AsyncIterator[HttpTokenSource]:
    lm = HttpTokenSource(fake.url, "", **TIMEOUTS)
    await lm.start()
    yield lm
    await lm.close()


async def collect(stream: TokenStream) -> tuple[list[list[int]], str | None]:
    deltas = [delta async for delta in stream]
    return deltas, stream.finish_reason


@pytest.fixture
def free_port() -> int:
    """A port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def unresponsive_port() -> Iterator[int]:
    """A port whose accept queue is full, so a new TCP connect hangs (Linux drops the SYNs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for sock in [*fillers, listener]:
        sock.close()


# --- URLs and messages -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "completions", "health"),
    [
        ("http://h:8000", "http://h:8000/v1/completions", "http://h:8000/health"),
        ("http://h:8000/", "http://h:8000/v1/completions", "http://h:8000/health"),
        ("http://h:8000/v1", "http://h:8000/v1/completions", "http://h:8000/health"),
        ("http://h:8000/v1/", "http://h:8000/v1/completions", "http://h:8000/health"),
        ("http://h:8000/v1/completions", "http://h:8000/v1/completions", "http://h:8000/health"),
        ("https://proxy/tts/v1", "https://proxy/tts/v1/completions", "https://proxy/tts/health"),
        ("http://h/v1x", "http://h/v1x/v1/completions", "http://h/v1x/health"),
    ],
)
def test_backend_urls(base: str, completions: str, health: str) -> None:
    assert tuple(map(str, backend_urls(base))) == (completions, health)


@pytest.mark.parametrize("base", ["h:8000", "ftp://h/", "/v1", ""])
def test_backend_urls_rejects_non_http(base: str) -> None:
    with pytest.raises(ValueError, match="http"):
        backend_urls(base)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"error": {"message": "too long", "type": "BadRequestError", "code": 400}}', "too long"),
        ('{"object": "error", "message": "old style", "code": 400}', "old style"),
        ('{"error": "Unauthorized"}', "Unauthorized"),
        ("<html>Bad Gateway</html>", "<html>Bad Gateway</html>"),
        ("", "(empty body)"),
    ],
)
def test_error_message(body: str, message: str) -> None:
    assert error_message(body) == message


# --- the request ---------------------------------------------------------------------------------------


async def test_request_body_and_headers_with_api_key(fake: FakeVLLM) -> None:
    fake.api_key = "sekret"
    source = HttpTokenSource(fake.url + "/v1", "sekret", **TIMEOUTS)
    await source.start()
    try:
        await collect(source.generate(PARAMS))
    finally:
        await source.close()
    request = fake.requests[0]
    assert request.body == {
        "model": MODEL,
        "prompt": PARAMS.prompt,
        "max_tokens": 500,
        "temperature": 0.7,
        "repetition_penalty": 1.1,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert request.headers["Authorization"] == "Bearer sekret"
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Accept"] == "text/event-stream"


async def test_no_authorization_header_without_key(fake: FakeVLLM, source: HttpTokenSource) -> None:
    await collect(source.generate(PARAMS))
    assert "Authorization" not in fake.requests[0].headers


async def test_optional_sampling_fields_are_sent_when_set(fake: FakeVLLM, source: HttpTokenSource) -> None:
    params = GenerationParams(**{**PARAMS.__dict__, "top_p": 0.9, "top_k": 50, "seed": 7})
    await collect(source.generate(params))
    body = fake.requests[0].body
    assert (body["top_p"], body["top_k"], body["seed"]) == (0.9, 50, 7)


async def test_nothing_is_sent_before_iteration(fake: FakeVLLM, source: HttpTokenSource) -> None:
    stream = source.generate(PARAMS)
    await stream.aclose()
    assert fake.requests == []
    assert stream.finish_reason == "cancelled"


async def test_generate_before_start_is_unavailable(fake: FakeVLLM) -> None:
    with pytest.raises(Unavailable):
        HttpTokenSource(fake.url, "", **TIMEOUTS).generate(PARAMS)


# --- the stream ----------------------------------------------------------------------------------------


async def test_one_delta_per_event(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=list(range(100, 110)), tokens_per_event=3)
    deltas, finish = await collect(source.generate(PARAMS))
    assert deltas == [[100, 101, 102], [103, 104, 105], [106, 107, 108], [109]]
    assert finish == "stop"


async def test_token_split_across_events(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=[11, 53404, 33], tokens_per_event=1, split_token=1)
    deltas, finish = await collect(source.generate(PARAMS))
    assert [code for delta in deltas for code in delta] == [11, 53404, 33]
    assert all(deltas)
    assert finish == "stop"


async def test_keepalive_comments_are_ignored(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=[1, 2, 3], keepalive_comments=True)
    deltas, finish = await collect(source.generate(PARAMS))
    assert deltas == [[1], [2], [3]]
    assert finish == "stop"


async def test_finish_reason_length_from_script(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=[1, 2, 3], finish_reason="length", tokens_per_event=2)
    assert await collect(source.generate(PARAMS)) == ([[1, 2], [3]], "length")


async def test_prompt_tokens_come_from_the_usage_chunk(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=[1, 2, 3])
    stream = source.generate(PARAMS)
    assert stream.prompt_tokens is None
    await collect(stream)
    assert stream.prompt_tokens == prompt_token_count(PARAMS.prompt) > 0


async def test_finish_reason_length_from_max_tokens(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=list(range(10)))
    params = GenerationParams(**{**PARAMS.__dict__, "max_tokens": 4})
    assert await collect(source.generate(params)) == ([[0], [1], [2], [3]], "length")


async def test_random_codes_scale_with_the_text(fake: FakeVLLM, source: HttpTokenSource) -> None:
    deltas, finish = await collect(source.generate(PARAMS))
    codes = [code for delta in deltas for code in delta]
    assert len(codes) == 12 * 5  # five words after "jenny: "
    assert all(0 <= code < 65536 for code in codes)
    assert finish == "stop"
    again, _ = await collect(source.generate(PARAMS))
    assert again == deltas


# --- failures ------------------------------------------------------------------------------------------


async def test_http_500_carries_status_and_backend_message(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(status=500)
    stream = source.generate(PARAMS)
    with pytest.raises(BackendError, match=r"500.*fake failure"):
        await collect(stream)
    assert stream.finish_reason == "error"


async def test_http_error_with_text_body(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(status=503, error_body="upstream is warming up")
    with pytest.raises(BackendError, match=r"503.*upstream is warming up"):
        await collect(source.generate(PARAMS))


async def test_wrong_api_key_is_a_backend_error(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.api_key = "sekret"
    with pytest.raises(BackendError, match=r"401.*Unauthorized"):
        await collect(source.generate(PARAMS))


async def test_unknown_model_is_a_backend_error(source: HttpTokenSource) -> None:
    params = GenerationParams(**{**PARAMS.__dict__, "model": "other"})
    with pytest.raises(BackendError, match=r"404.*does not exist"):
        await collect(source.generate(params))


async def test_error_event_mid_stream(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=[1, 2, 3], error_after_events=2)
    stream = source.generate(PARAMS)
    assert await anext(stream) == [1]
    assert await anext(stream) == [2]
    with pytest.raises(BackendError, match="fake failure during generation"):
        await anext(stream)
    assert stream.finish_reason == "error"


async def test_malformed_line_is_an_error_not_skipped(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=[1, 2, 3], malformed_after_events=1)
    with pytest.raises(BackendError, match="malformed"):
        await collect(source.generate(PARAMS))


async def test_connection_dropped_mid_stream(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=[1, 2, 3, 4], drop_after_events=2)
    stream = source.generate(PARAMS)
    assert await anext(stream) == [1]
    assert await anext(stream) == [2]
    with pytest.raises(BackendError, match="connection failed"):
        await anext(stream)


async def test_stream_ending_without_done_or_finish(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=[1, 2], end_without_done=True)
    with pytest.raises(BackendError, match="before it finished"):
        await collect(source.generate(PARAMS))


async def test_out_of_range_speech_token(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=[1, 70000])
    with pytest.raises(BackendError, match="invalid speech token"):
        await collect(source.generate(PARAMS))


async def test_connection_refused(free_port: int) -> None:
    source = HttpTokenSource(f"http://127.0.0.1:{free_port}", "", **TIMEOUTS)
    await source.start()
    try:
        with pytest.raises(BackendError, match="connection failed"):
            await collect(source.generate(PARAMS))
    finally:
        await source.close()


async def test_connect_timeout(unresponsive_port: int) -> None:
    source = HttpTokenSource(
        f"http://127.0.0.1:{unresponsive_port}",
        "",
        connect_timeout_s=0.2,
        first_token_timeout_s=5.0,
        token_timeout_s=5.0,
    )
    await source.start()
    started = time.monotonic()
    try:
        with pytest.raises(BackendTimeout, match="connection"):
            await collect(source.generate(PARAMS))
    finally:
        await source.close()
    assert time.monotonic() - started < 2.0


async def test_first_token_timeout(fake: FakeVLLM) -> None:
    fake.script = Script(codes=[1, 2], first_token_delay_s=5.0)
    source = HttpTokenSource(
        fake.url, "", connect_timeout_s=1.0, first_token_timeout_s=0.2, token_timeout_s=5.0
    )
    await source.start()
    try:
        with pytest.raises(BackendTimeout, match="first token"):
            await collect(source.generate(PARAMS))
        await fake.wait_disconnected(timeout=1.0)
    finally:
        await source.close()


async def test_gap_between_events_timeout(fake: FakeVLLM) -> None:
    fake.script = Script(codes=[1, 2, 3], stall_after_events=2, stall_s=5.0)
    source = HttpTokenSource(
        fake.url, "", connect_timeout_s=1.0, first_token_timeout_s=5.0, token_timeout_s=0.2
    )
    await source.start()
    try:
        stream = source.generate(PARAMS)
        assert await anext(stream) == [1]
        assert await anext(stream) == [2]
        with pytest.raises(BackendTimeout, match="next token"):
            await anext(stream)
        await fake.wait_disconnected(timeout=1.0)
    finally:
        await source.close()


# --- aborts --------------------------------------------------------------------------------------------


async def test_aclose_disconnects_upstream(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=list(range(1000)), tokens_per_s=100)
    stream = source.generate(PARAMS)
    assert await anext(stream) == [0]
    closed_at = time.monotonic()
    await stream.aclose()
    assert await fake.wait_disconnected(timeout=1.0) - closed_at < 1.0
    assert stream.finish_reason == "cancelled"
    assert not fake.requests[0].completed
    assert [delta async for delta in stream] == []


async def test_cancelling_the_consumer_disconnects_upstream(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=list(range(1000)), tokens_per_s=100)
    stream = source.generate(PARAMS)
    first = asyncio.Event()

    async def consume() -> None:
        async for _ in stream:
            first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await fake.wait_disconnected(timeout=1.0)
    assert stream.finish_reason == "cancelled"


async def test_aclose_from_another_task_ends_the_iteration(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=[1, 2], stall_after_events=1, stall_s=5.0)
    stream = source.generate(PARAMS)
    assert await anext(stream) == [1]
    waiting = asyncio.create_task(anext(stream))
    await asyncio.sleep(0.05)  # let it block on the stalled connection
    await stream.aclose()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiting, 1.0)
    await fake.wait_disconnected(timeout=1.0)
    assert stream.finish_reason == "cancelled"


async def test_complete_streams_reuse_the_connection(fake: FakeVLLM, source: HttpTokenSource) -> None:
    fake.script = Script(codes=[1, 2])
    for _ in range(3):
        assert await collect(source.generate(PARAMS)) == ([[1], [2]], "stop")
    assert all(request.completed and request.disconnected_at is None for request in fake.requests)
    assert len({request.peer for request in fake.requests}) == 1


# --- readiness -----------------------------------------------------------------------------------------


async def test_ready(fake: FakeVLLM, source: HttpTokenSource) -> None:
    assert await source.ready()
    fake.healthy = False
    assert not await source.ready()


async def test_not_ready_before_start_or_when_unreachable(fake: FakeVLLM, free_port: int) -> None:
    assert not await HttpTokenSource(fake.url, "", **TIMEOUTS).ready()
    source = HttpTokenSource(f"http://127.0.0.1:{free_port}/v1", "", **TIMEOUTS)
    await source.start()
    try:
        assert not await source.ready()
    finally:
        await source.close()
