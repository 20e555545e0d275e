"""The official ``openai`` package against the server: plain create() and the streaming response."""

from __future__ import annotations

import base64
import io
import json
import wave
from collections.abc import AsyncIterator

import openai
import pytest

from tests.api.test_speech_formats import FRAME_TOLERANCE_S, MEDIA_TYPES, decoded_seconds
from tests.fakes.fake_vllm import FakeVLLM

N_CODES = 48


@pytest.fixture
async def client(app_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(api_key="not-needed", base_url=app_url + "/v1", max_retries=0) as sdk:
        yield sdk


async def test_create_returns_whole_wav(client: openai.AsyncOpenAI) -> None:
    response = await client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hello from the SDK.", response_format="wav"
    )
    with wave.open(io.BytesIO(response.content)) as wav:
        assert wav.getframerate() == 24000
        assert len(wav.readframes(10**9)) == N_CODES * 480 * 2


async def test_streaming_response_iterates_pcm(client: openai.AsyncOpenAI, fake_vllm: FakeVLLM) -> None:
    async with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts", voice="nova", input="Streaming please.", response_format="pcm"
    ) as response:
        assert response.headers["content-type"] == "audio/pcm"
        assert response.http_request.headers["accept"] == "application/octet-stream"
        chunks = [chunk async for chunk in response.iter_bytes()]
    assert sum(map(len, chunks)) == N_CODES * 480 * 2
    assert fake_vllm.requests[-1].body["prompt"].startswith("<|im_start|>idayu: ")


async def test_sdk_errors_carry_param_and_code(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await client.audio.speech.create(model="tts-1", voice="nobody", input="x")
    assert info.value.param == "voice"
    assert info.value.code == "voice_not_found"
    assert info.value.request_id
    with pytest.raises(openai.NotFoundError):
        await client.audio.speech.create(model="whisper-1", voice="alloy", input="x")


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav", "pcm"])
async def test_streaming_response_for_every_format(client: openai.AsyncOpenAI, fmt: str) -> None:
    async with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="alloy", input="Every format.", response_format=fmt, speed=1.0
    ) as response:
        assert response.headers["content-type"] == MEDIA_TYPES[fmt]
        data = b"".join([chunk async for chunk in response.iter_bytes()])
    expected = N_CODES * 480 / 24000
    assert abs(decoded_seconds(data, fmt) - expected) <= FRAME_TOLERANCE_S[fmt] + 1e-9


async def test_streaming_response_with_sse(client: openai.AsyncOpenAI) -> None:
    async with client.audio.speech.with_streaming_response.create(
        model="gpt-4o-mini-tts",
        voice="ash",
        input="Events please.",
        response_format="mp3",
        stream_format="sse",
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line async for line in response.iter_lines()]
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    assert [line for line in lines if line][-1] == "data: [DONE]"
    assert events[-1]["type"] == "speech.audio.done"
    assert events[-1]["usage"]["output_tokens"] == N_CODES
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert abs(decoded_seconds(audio, "mp3") - N_CODES * 480 / 24000) <= FRAME_TOLERANCE_S["mp3"]
