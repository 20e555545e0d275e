"""/v1/audio/normalize and the speech endpoint's text options, with a fake OpenAI-compatible LLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import http_settings, serve
from tests.fakes.fake_openai import ChatScript, FakeOpenAI
from tests.fakes.fake_vllm import FakeVLLM

SPOKEN_IN = "Your total is RM1,250.50 and the meeting is at 3pm on 12/9/2026."
SPOKEN_OUT = (
    "Your total is one thousand two hundred fifty ringgit fifty sen and the meeting is at three p m on the "
    "twelfth of September twenty twenty six."
)


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    fake = FakeOpenAI(replies={"baki saya RM5": "baki saya lima ringgit"})
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
async def llm_app_url(tiny_codec_dir: Path, fake_vllm: FakeVLLM, fake_llm: FakeOpenAI) -> AsyncIterator[str]:
    settings = http_settings(
        tiny_codec_dir,
        fake_vllm.url,
        OPENAI_BASE_URL=fake_llm.url,
        OPENAI_MODEL_NAME="normalizer-model",
        OPENAI_API_KEY="sk-test",
    )
    async with serve(settings) as url:
        yield url


async def normalize(url: str, **fields: object) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(url + "/v1/audio/normalize", json=fields)


async def test_spoken_mode_reads_money_times_and_dates(app_url: str) -> None:
    response = await normalize(app_url, input=SPOKEN_IN, mode="spoken")
    assert response.status_code == 200
    assert response.json() == {"output": SPOKEN_OUT, "mode": "spoken"}


async def test_rule_mode_is_the_default_and_strips_markdown(app_url: str) -> None:
    response = await normalize(app_url, input="**Hello** _there_, how can I help?")
    assert response.json() == {"output": "Hello there, how can I help?", "mode": "rule"}


async def test_llm_mode_unconfigured_is_400(app_url: str) -> None:
    response = await normalize(app_url, input="RM5", mode="llm")
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "mode"


@pytest.mark.parametrize(
    ("fields", "param"),
    [({"mode": "magic"}, "mode"), ({"language": "fr"}, "language"), ({"prompt": "x" * 2001}, "prompt")],
)
async def test_bad_text_options_are_422(app_url: str, fields: dict[str, object], param: str) -> None:
    response = await normalize(app_url, input="hello", **fields)
    assert response.status_code == 422
    assert response.json()["error"]["param"] == param


async def test_llm_mode_calls_the_model_and_fails_with_502(llm_app_url: str, fake_llm: FakeOpenAI) -> None:
    response = await normalize(llm_app_url, input="baki saya RM5", mode="llm", prompt="Be brief.")
    assert response.json() == {"output": "baki saya lima ringgit", "mode": "llm"}
    sent = fake_llm.requests[-1]
    assert sent.body["model"] == "normalizer-model"
    assert "Be brief." in sent.system_text
    fake_llm.script = ChatScript(status=500)
    failed = await normalize(llm_app_url, input="baki saya RM5", mode="llm")
    assert failed.status_code == 502
    assert failed.json()["error"]["type"] == "server_error"


async def test_speech_uses_the_normalized_text(app_url: str, fake_vllm: FakeVLLM) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(
            app_url + "/v1/audio/speech", json={"input": SPOKEN_IN, "mode": "spoken", "stream": False}
        )
    assert response.status_code == 200
    assert fake_vllm.requests[-1].body["prompt"] == f"<|im_start|>husein: {SPOKEN_OUT}<|speech_start|>"


async def test_speech_falls_back_to_spoken_when_llm_fails(
    llm_app_url: str, fake_vllm: FakeVLLM, fake_llm: FakeOpenAI
) -> None:
    fake_llm.script = ChatScript(status=500)
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(
            llm_app_url + "/v1/audio/speech", json={"input": SPOKEN_IN, "mode": "llm", "stream": False}
        )
    assert response.status_code == 200
    assert SPOKEN_OUT in fake_vllm.requests[-1].body["prompt"]
