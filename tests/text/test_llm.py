"""LLMNormalizer against a fake OpenAI-compatible chat server: wire format, retries, failures, skip-plain."""

from __future__ import annotations

import json
import socket
import time

import pytest

from app.core.errors import BackendError
from app.text.llm import (
    FEW_SHOT,
    MAX_PROMPT_CHARS,
    RESPONSE_FORMAT,
    LLMNormalizer,
    LLMNormalizerError,
    chat_completions_url,
    needs_normalization,
    parse_reply,
)
from tests.fakes.fake_openai import ChatScript, FakeOpenAI
from tests.text.conftest import SPOKEN, TEXT


async def test_sends_an_openai_chat_request(fake: FakeOpenAI, llm: LLMNormalizer) -> None:
    assert await llm.normalize(TEXT, "auto") == SPOKEN
    [request] = fake.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == "Bearer sk-test"
    body = request.body
    assert body["model"] == "normalizer-model"
    assert body["temperature"] == 0
    assert body["max_tokens"] == 256 + 2 * len(TEXT)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "normalized",
            "schema": {
                "type": "object",
                "properties": {"normalized": {"type": "string"}},
                "required": ["normalized"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }
    assert body["response_format"] == RESPONSE_FORMAT
    assert [message["role"] for message in body["messages"]] == ["system", "user"]
    assert request.user_text == TEXT
    for source, spoken in FEW_SHOT:
        assert source in request.system_text
        assert json.dumps({"normalized": spoken}, ensure_ascii=False) in request.system_text
    assert "Additional instructions" not in request.system_text


async def test_few_shot_prompt_is_short_and_multilingual() -> None:
    assert 4 <= len(FEW_SHOT) <= 8
    sources = " ".join(source for source, _ in FEW_SHOT)
    assert "Sila" in sources and "您" in sources and "உங்கள்" in sources and "Your" in sources
    assert "meeting kita" in sources  # Malay/English code-switch


async def test_language_hint_and_caller_prompt(fake: FakeOpenAI, llm: LLMNormalizer) -> None:
    await llm.normalize(TEXT, "ms", prompt="Read IC numbers in groups of two.")
    system = fake.requests[0].system_text
    assert "This text is in Malay" in system
    assert system.endswith(
        "Additional instructions from the caller for this text:\nRead IC numbers in groups of two."
    )
    await llm.normalize(TEXT, "auto")
    assert "This text is in" not in fake.requests[1].system_text


async def test_prompt_longer_than_the_limit_is_refused(llm: LLMNormalizer) -> None:
    with pytest.raises(ValueError, match="prompt"):
        await llm.normalize(TEXT, "auto", prompt="x" * (MAX_PROMPT_CHARS + 1))


async def test_plain_text_skips_the_call(fake: FakeOpenAI, llm: LLMNormalizer) -> None:
    for plain in (
        "Hello there, how can I help you today?",
        "Terima kasih kerana menunggu!",
        "谢谢您。",
        "   ",
    ):
        assert await llm.normalize(plain, "auto") == plain
    assert fake.requests == []


async def test_skip_plain_off_always_calls(fake: FakeOpenAI) -> None:
    client = LLMNormalizer(fake.url, fake.api_key, fake.model, timeout_s=2.0, skip_plain=False)
    await client.start()
    try:
        assert await client.normalize("Hello there.", "en") == "Hello there."
    finally:
        await client.close()
    assert len(fake.requests) == 1


async def test_400_on_the_schema_retries_once_without_it(fake: FakeOpenAI, llm: LLMNormalizer) -> None:
    fake.script = ChatScript(reject_schema=True)
    assert await llm.normalize(TEXT, "auto") == SPOKEN
    first, second = fake.requests
    assert "response_format" in first.body
    assert "response_format" not in second.body
    assert second.body["messages"] == first.body["messages"]


async def test_retry_reply_may_be_plain_text(fake: FakeOpenAI, llm: LLMNormalizer) -> None:
    fake.script = ChatScript(reject_schema=True, plain_without_schema=True)
    assert await llm.normalize(TEXT, "auto") == SPOKEN
    assert len(fake.requests) == 2


async def test_400_twice_is_an_error(fake: FakeOpenAI, llm: LLMNormalizer) -> None:
    fake.script = ChatScript(status=400)
    with pytest.raises(LLMNormalizerError, match="HTTP 400"):
        await llm.normalize(TEXT, "auto")
    assert len(fake.requests) == 2


@pytest.mark.parametrize("status", [401, 404, 429, 500, 503])
async def test_http_errors_raise_a_502(fake: FakeOpenAI, llm: LLMNormalizer, status: int) -> None:
    fake.script = ChatScript(status=status)
    with pytest.raises(LLMNormalizerError, match=f"HTTP {status}") as caught:
        await llm.normalize(TEXT, "auto")
    assert isinstance(caught.value, BackendError)
    assert caught.value.status == 502
    assert len(fake.requests) == 1


async def test_wrong_api_key_is_an_error(fake: FakeOpenAI) -> None:
    client = LLMNormalizer(fake.url, "sk-wrong", fake.model, timeout_s=2.0)
    await client.start()
    try:
        with pytest.raises(LLMNormalizerError, match="HTTP 401"):
            await client.normalize(TEXT, "auto")
    finally:
        await client.close()


async def test_slow_server_times_out(fake: FakeOpenAI) -> None:
    fake.script = ChatScript(delay_s=2.0)
    client = LLMNormalizer(fake.url, fake.api_key, fake.model, timeout_s=0.2)
    await client.start()
    started = time.monotonic()
    try:
        with pytest.raises(LLMNormalizerError, match=r"within 0\.2 s"):
            await client.normalize(TEXT, "auto")
    finally:
        await client.close()
    assert time.monotonic() - started < 1.0


async def test_timeout_covers_the_retry_too(fake: FakeOpenAI) -> None:
    fake.script = ChatScript(reject_schema=True, delay_s=0.15)
    client = LLMNormalizer(fake.url, fake.api_key, fake.model, timeout_s=0.25)
    await client.start()
    try:
        with pytest.raises(LLMNormalizerError, match="within"):
            await client.normalize(TEXT, "auto")
    finally:
        await client.close()


async def test_unreachable_server_is_an_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = LLMNormalizer(f"http://127.0.0.1:{port}/v1", "", "m", timeout_s=2.0)
    await client.start()
    try:
        with pytest.raises(LLMNormalizerError, match="could not be reached"):
            await client.normalize(TEXT, "auto")
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("script", "match"),
    [
        (ChatScript(content="seribu ringgit"), "did not answer"),
        (ChatScript(content='{"text": "seribu"}'), "did not answer"),
        (ChatScript(content='{"normalized": 5}'), "did not answer"),
        (ChatScript(content='{"normalized": "  "}'), "empty"),
        (ChatScript(raw_body="{not json"), "malformed"),
        (ChatScript(raw_body='{"choices": []}'), "malformed"),
        (ChatScript(raw_body='{"choices": [{"message": {"content": null}}]}'), "no text"),
        (ChatScript(finish_reason="length"), "cut off"),
    ],
)
async def test_malformed_replies_raise(
    fake: FakeOpenAI, llm: LLMNormalizer, script: ChatScript, match: str
) -> None:
    fake.script = script
    with pytest.raises(LLMNormalizerError, match=match):
        await llm.normalize(TEXT, "auto")


async def test_code_fenced_json_is_accepted(fake: FakeOpenAI, llm: LLMNormalizer) -> None:
    fake.script = ChatScript(content='```json\n{"normalized": "lima ringgit"}\n```')
    assert await llm.normalize("RM5", "ms") == "lima ringgit"


async def test_base_url_without_v1(fake: FakeOpenAI) -> None:
    client = LLMNormalizer(fake.url.removesuffix("/v1"), fake.api_key, fake.model, timeout_s=2.0)
    await client.start()
    try:
        assert await client.normalize(TEXT, "auto") == SPOKEN
    finally:
        await client.close()
    assert fake.requests[0].path == "/v1/chat/completions"


async def test_not_started_and_close_twice(fake: FakeOpenAI) -> None:
    client = LLMNormalizer(fake.url, fake.api_key, fake.model, timeout_s=2.0)
    with pytest.raises(RuntimeError, match="start"):
        await client.normalize(TEXT, "auto")
    await client.start()
    await client.close()
    await client.close()


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        ("http://host:8000", "http://host:8000/v1/chat/completions"),
        ("http://host:8000/", "http://host:8000/v1/chat/completions"),
        ("http://host:8000/v1", "http://host:8000/v1/chat/completions"),
        ("http://host:8000/v1/", "http://host:8000/v1/chat/completions"),
        ("https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1/chat/completions"),
        ("https://x.example/v1/chat/completions", "https://x.example/v1/chat/completions"),
    ],
)
def test_chat_completions_url(base_url: str, expected: str) -> None:
    assert chat_completions_url(base_url) == expected


@pytest.mark.parametrize("bad", ["", "host:8000", "ftp://host/v1", "http://"])
def test_bad_base_url_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="OPENAI_BASE_URL"):
        LLMNormalizer(bad, "", "model", timeout_s=1.0)


def test_model_and_timeout_are_required() -> None:
    with pytest.raises(ValueError, match="OPENAI_MODEL_NAME"):
        LLMNormalizer("http://h/v1", "", "", timeout_s=1.0)
    with pytest.raises(ValueError, match="OPENAI_TIMEOUT"):
        LLMNormalizer("http://h/v1", "", "m", timeout_s=0)


@pytest.mark.parametrize(
    "text",
    [
        "I have 2 cats",
        "Tiga ratus ringgit, atau RM300",
        "50% off",
        "email me at ali@example.com",
        "call me at home/office",
        "Tom & Jerry",
        "#hashtag",
        "Price in €",
        "snake_case",
        "Meet Dr Tan tomorrow",
        "Jumpa di Jln Ampang",
        "Syarikat ABC Sdn Bhd",
        "St. John will come",
        "see e.g. this",
        "The NASA launch",
        "Saya di KL",
        "ஆண்டு ௨௦௨௪",
    ],
)
def test_needs_normalization(text: str) -> None:
    assert needs_normalization(text)


@pytest.mark.parametrize(
    "text",
    [
        "Hello there, how can I help you today?",
        "I said no. It's fine - really!",
        "Terima kasih kerana menunggu, ya?",
        "您好，请问有什么可以帮您？",
        "வணக்கம், எப்படி இருக்கிறீர்கள்?",
        "Well... maybe (or not).",
        "\"Quoted\" and 'single' text; done: yes",
        "I am here",
    ],
)
def test_plain_text_needs_nothing(text: str) -> None:
    assert not needs_normalization(text)


def test_parse_reply_without_schema_accepts_json_string_and_text() -> None:
    def body(content: str) -> str:
        return json.dumps({"choices": [{"message": {"content": content}, "finish_reason": "stop"}]})

    assert parse_reply(body('{"normalized": "a"}'), structured=False) == "a"
    assert parse_reply(body('"b"'), structured=False) == "b"
    assert parse_reply(body("plain c"), structured=False) == "plain c"
    assert parse_reply(body("42"), structured=False) == "42"
    with pytest.raises(LLMNormalizerError):
        parse_reply(body('"b"'), structured=True)
