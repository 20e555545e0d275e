"""/v1/audio/speech end to end: the real app + tiny NeuCodec + the fake vLLM, over a real socket."""

from __future__ import annotations

import asyncio
import io
import json
import wave
from pathlib import Path

import httpx
import numpy as np
import pytest

from app.families.neucodec.prompt import estimate_tokens
from tests.api.conftest import http_settings, serve
from tests.fakes.fake_vllm import FakeVLLM, Script

N_CODES = 48  # the fake's default script
SPEECH = "/v1/audio/speech"


def body(**fields: object) -> dict[str, object]:
    return {"input": "Hello there, how can I help you?", "voice": "husein"} | fields


async def post(url: str, payload: object, **kwargs: object) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(url + SPEECH, json=payload, **kwargs)


def assert_openai_error(response: httpx.Response, status: int, param: str | None = None) -> dict[str, object]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    if param is not None:
        assert error["param"] == param
    return error


async def test_streamed_pcm_has_exact_length_and_headers(app_url: str, fake_vllm: FakeVLLM) -> None:
    fake_vllm.script = Script(codes=list(range(2000, 2200)), tokens_per_event=8)  # 4 s: several chunks
    async with (
        httpx.AsyncClient(timeout=10) as client,
        client.stream("POST", app_url + SPEECH, json=body(response_format="pcm")) as response,
    ):
        chunks = [chunk async for chunk in response.aiter_raw()]
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/pcm"
    assert response.headers["x-audio-sample-rate"] == "24000"
    assert response.headers["x-audio-channels"] == "1"
    assert response.headers["x-audio-bit-depth"] == "16"
    assert response.headers["x-request-id"]
    assert response.headers.get("transfer-encoding") == "chunked"
    assert len(chunks) > 1, "the body should arrive in several chunks"
    audio = b"".join(chunks)
    assert len(audio) == 200 * 480 * 2
    samples = np.frombuffer(audio, dtype="<i2")
    assert np.abs(samples).max() > 0, "random weights make noise, not silence"


async def test_prompt_and_sampling_reach_the_backend(app_url: str, fake_vllm: FakeVLLM) -> None:
    response = await post(
        app_url,
        body(input="Hi <|im_end|> you", voice={"id": "nova"}, model="tts-1", temperature=0.3, seed=7),
    )
    assert response.status_code == 200
    sent = fake_vllm.requests[-1].body
    assert sent["prompt"] == "<|im_start|>idayu: Hi you<|speech_start|>"
    assert sent["model"] == "TTS-model"
    assert sent["stream"] is True
    assert sent["temperature"] == 0.3 and sent["seed"] == 7
    assert sent["repetition_penalty"] == 1.15 and sent["max_tokens"] == 3072
    assert "top_p" not in sent and "top_k" not in sent
    assert "authorization" not in {k.lower() for k in fake_vllm.requests[-1].headers}


async def test_streamed_wav_is_readable_and_exact(app_url: str) -> None:
    response = await post(app_url, body(response_format="wav", stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/wav"
    with wave.open(io.BytesIO(response.content)) as wav:
        assert (wav.getframerate(), wav.getnchannels(), wav.getsampwidth()) == (24000, 1, 2)
        frames = wav.readframes(10**9)
    assert len(frames) == N_CODES * 480 * 2


async def test_buffered_wav_has_exact_sizes(app_url: str) -> None:
    response = await post(app_url, body(response_format="wav", stream=False))
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/wav"
    assert int(response.headers["content-length"]) == len(response.content) == 44 + N_CODES * 480 * 2
    with wave.open(io.BytesIO(response.content)) as wav:
        assert wav.getnframes() == N_CODES * 480


async def test_buffered_pcm_equals_streamed_pcm(app_url: str) -> None:
    buffered = await post(app_url, body(stream=False, response_format="pcm"))
    streamed = await post(app_url, body(stream=True, response_format="pcm"))
    assert buffered.status_code == streamed.status_code == 200
    assert int(buffered.headers["content-length"]) == N_CODES * 480 * 2
    assert buffered.headers["x-audio-sample-rate"] == "24000"
    assert buffered.content == streamed.content


async def test_tokens_split_across_events_still_parse(app_url: str, fake_vllm: FakeVLLM) -> None:
    fake_vllm.script = Script(codes=list(range(40)), tokens_per_event=3, split_token=5)
    response = await post(app_url, body())
    assert response.status_code == 200
    assert len(response.content) == 40 * 480 * 2


@pytest.mark.parametrize(
    ("script", "status"),
    [
        (Script(status=500, error_body={"error": {"message": "engine dead", "type": "x", "code": 500}}), 502),
        (Script(codes=list(range(48)), drop_after_events=0), 502),
        (Script(codes=list(range(48)), malformed_after_events=0), 502),
        (Script(codes=list(range(48)), first_token_delay_s=3.0), 504),
        (Script(codes=[]), 502),
    ],
    ids=["http-500", "dropped", "malformed", "slow-first-token", "no-tokens"],
)
async def test_backend_failures_give_a_status_before_audio(
    app_url: str, fake_vllm: FakeVLLM, script: Script, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    fake_vllm.script = script
    for stream in (True, False):
        error = assert_openai_error(await post(app_url, body(stream=stream)), status)
        assert error["type"] == "server_error"
    if script.status == 500:  # the backend's own words go to the log, never to the client
        assert "engine dead" not in str(error["message"]) and "500" in str(error["message"])
        assert any("engine dead" in record.getMessage() for record in caplog.records)


async def test_backend_refusing_the_request_is_a_client_error(app_url: str, fake_vllm: FakeVLLM) -> None:
    """vLLM answers 400 to a request that does not fit the model: the client's mistake, not ours."""
    fake_vllm.script = Script(
        status=400, error_body={"error": {"message": "maximum context length exceeded (internal)"}}
    )
    error = assert_openai_error(await post(app_url, body()), 400)
    assert error["code"] == "backend_refused_request" and "internal" not in str(error["message"])


async def test_unreachable_backend_is_502(tiny_codec_dir: Path) -> None:
    async with serve(http_settings(tiny_codec_dir, "http://127.0.0.1:9")) as url:
        error = assert_openai_error(await post(url, body()), 502)
        assert "127.0.0.1" not in str(error["message"]) and ":9" not in str(error["message"])  # no address
        async with httpx.AsyncClient(timeout=10) as client:
            ready = await client.get(url + "/ready")
        assert ready.status_code == 503
        assert ready.json()["checks"] == {"codec": True, "lm": False}


async def test_client_disconnect_closes_the_backend_stream(app_url: str, fake_vllm: FakeVLLM) -> None:
    fake_vllm.script = Script(codes=list(range(2000)), tokens_per_event=5, tokens_per_s=200)
    tasks_before = asyncio.all_tasks()
    async with httpx.AsyncClient(timeout=10) as client:
        async with client.stream("POST", app_url + SPEECH, json=body(max_tokens=2000)) as response:
            assert response.status_code == 200
            async for _chunk in response.aiter_raw():
                break  # the first audio arrived: hang up
        hung_up = asyncio.get_running_loop().time()
    closed_at = await fake_vllm.wait_disconnected(timeout=1.0)
    assert closed_at - hung_up < 1.0
    assert not fake_vllm.requests[-1].completed
    await asyncio.sleep(0.2)
    leftover = {t for t in asyncio.all_tasks() - tasks_before if not t.done()}
    assert {t.get_coro().__qualname__ for t in leftover} <= {"Server.serve"}


async def test_client_disconnect_before_first_audio_closes_the_backend(
    app_url: str, fake_vllm: FakeVLLM
) -> None:
    fake_vllm.script = Script(codes=list(range(100)), first_token_delay_s=1.5)
    async with httpx.AsyncClient(timeout=0.3) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.post(app_url + SPEECH, json=body())
    await fake_vllm.wait_disconnected(timeout=1.0)


@pytest.mark.parametrize(
    ("payload", "status", "param"),
    [
        (body(voice="nobody"), 400, "voice"),
        (body(voice={"id": "nobody"}), 400, "voice"),
        (body(model="gpt-5"), 404, "model"),
        (body(temperature=5), 422, "temperature"),
        (body(repetition_penalty=0), 422, "repetition_penalty"),
        (body(max_tokens=0), 422, "max_tokens"),
        (body(playback_speed=0), 422, "playback_speed"),
        (body(playback_overlap_speed=-1), 422, "playback_overlap_speed"),
        (body(response_format="ogg"), 422, "response_format"),
        (body(stream_format="websocket"), 422, "stream_format"),
        (body(speed=3.0), 422, "speed"),
        (body(stream_normalize="sometimes"), 422, "stream_normalize"),
        (body(input=""), 422, "input"),
        (body(input="   <|im_end|>  "), 400, "input"),  # nothing speakable: well-formed, not servable
        (body(input="x" * 5000), 422, "input"),
        ({"voice": "husein"}, 422, "input"),
    ],
)
async def test_bad_requests_get_the_openai_error_body(
    app_url: str, fake_vllm: FakeVLLM, payload: dict[str, object], status: int, param: str
) -> None:
    assert_openai_error(await post(app_url, payload), status, param)
    assert fake_vllm.requests == [], "nothing may reach the LM for a rejected request"


async def test_malformed_json_is_400(app_url: str) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(
            app_url + SPEECH, content=b'{"input": "hi",', headers={"content-type": "application/json"}
        )
    error = assert_openai_error(response, 400)
    assert error["code"] == "invalid_json"


async def test_unknown_fields_are_ignored_and_aliases_accepted(app_url: str) -> None:
    for model in ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15", "TTS-model"):
        response = await post(app_url, body(model=model, voice="alloy", extra_field={"x": 1}, stream=False))
        assert response.status_code == 200, (model, response.text)


async def test_catalog_and_probes(app_url: str) -> None:
    async with httpx.AsyncClient(base_url=app_url, timeout=10) as client:
        models = (await client.get("/v1/models")).json()
        assert models["object"] == "list"
        assert {m["id"] for m in models["data"]} == {"TTS-model", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"}
        assert all(m["object"] == "model" for m in models["data"])
        voices = (await client.get("/v1/audio/voices")).json()["voices"]
        assert [(v["id"], v["name"]) for v in voices] == [("husein", "husein"), ("idayu", "idayu")]
        assert "nova" in voices[1]["aliases"]
        assert (await client.get("/v1/audio/speaker")).json() == ["husein", "idayu"]
        assert (await client.get("/")).status_code == 200
        assert (await client.get("/health")).json() == {"status": "ok"}
        ready = await client.get("/ready")
        assert ready.status_code == 200 and ready.json()["checks"] == {"codec": True, "lm": True}
        missing = await client.get("/v1/nothing")
        assert_openai_error(missing, 404)
        assert missing.headers["x-request-id"]
        echoed = await client.get("/health", headers={"x-request-id": "abc-123"})
        assert echoed.headers["x-request-id"] == "abc-123"


async def test_api_key_is_sent_as_bearer(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    fake_vllm.api_key = "sekrit"
    async with serve(http_settings(tiny_codec_dir, fake_vllm.url, TTS_API_KEY="sekrit")) as url:
        response = await post(url, body())
    assert response.status_code == 200
    assert fake_vllm.requests[-1].headers["Authorization"] == "Bearer sekrit"


def test_openapi_pins_the_speech_request(tiny_codec_dir: Path) -> None:
    from app.main import create_app

    schema = create_app(http_settings(tiny_codec_dir, "http://127.0.0.1:9")).openapi()
    paths = {(path, method) for path, ops in schema["paths"].items() for method in ops}
    assert paths == {
        ("/v1/audio/speech", "post"),
        ("/v1/audio/vc", "post"),
        ("/v1/audio/voices", "post"),
        ("/v1/audio/voices/{name}", "delete"),
        ("/v1/audio/normalize", "post"),
        ("/v1/audio/lexicons", "post"),
        ("/v1/audio/lexicons", "get"),
        ("/v1/audio/lexicons/{name}", "get"),
        ("/v1/audio/lexicons/{name}", "delete"),
        ("/v1/audio/interleave/{interleave_id}", "get"),
        ("/v1/audio/interleave/{interleave_id}", "delete"),
        ("/v1/models", "get"),
        ("/v1/audio/voices", "get"),
        ("/v1/audio/speaker", "get"),
        ("/", "get"),
        ("/health", "get"),
        ("/ready", "get"),
    }
    fields = list(schema["components"]["schemas"]["SpeechRequest"]["properties"])
    assert fields == json.loads(
        '["model", "input", "voice", "instructions", "response_format", "speed", "stream_format", "stream",'
        ' "temperature", "repetition_penalty", "max_tokens", "top_p", "top_k", "seed", "playback_speed",'
        ' "playback_overlap_speed", "stream_normalize", "mode", "normalize_malaysian", "language", "prompt",'
        ' "interleave_id", "max_retain_interleave", "lexicons"]'
    )
    assert schema["components"]["schemas"]["SpeechRequest"]["required"] == ["input"]


async def test_errors_quote_a_client_value_cut_short(app_url: str) -> None:
    """A huge plain-string voice or model is not sent back whole in the error body."""
    huge = "v" * 200_000
    async with httpx.AsyncClient(timeout=20) as client:
        voice = await client.post(app_url + SPEECH, json=body(voice=huge))
        model = await client.post(app_url + SPEECH, json=body(model=huge))
    assert voice.status_code == 400 and model.status_code == 404
    for response in (voice, model):
        assert len(response.content) < 2000
        assert "200000 characters" in response.json()["error"]["message"]


async def test_max_tokens_fits_what_the_prompt_leaves_of_the_lm_window(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM
) -> None:
    """max_tokens (the default and an explicit one) is cut to the window left after the prompt; a text
    too long for the window is spoken in parts, each fitted the same way; a prompt that leaves no room
    even for one word is a 400 before the backend is asked: never a 502 from vLLM."""
    settings = http_settings(
        tiny_codec_dir, fake_vllm.url, LM_MAX_MODEL_LEN=512, INTERLEAVE_MIN_GEN_TOKENS=100
    )
    words = " ".join(["hello"] * 10)
    async with serve(settings) as url:
        fits = await post(url, body(input=words))
        explicit = await post(url, body(input=words, max_tokens=30000))
        assert fits.status_code == explicit.status_code == 200
        assert len(fake_vllm.requests) == 2
        long = await post(url, body(input=" ".join(["hello"] * 600)))
        assert long.status_code == 200
        too_long = await post(url, body(input="x" * 1500))  # one word: never cut, and it fills the window
    for request in fake_vllm.requests:
        assert request.body["max_tokens"] == 512 - estimate_tokens(request.body["prompt"])
    parts = [request.body["prompt"] for request in fake_vllm.requests[2:]]
    assert len(parts) > 1
    assert " ".join(
        p.removeprefix("<|im_start|>husein: ").removesuffix("<|speech_start|>") for p in parts
    ) == (" ".join(["hello"] * 600))
    error = assert_openai_error(too_long, 400)
    assert error["param"] == "input" and error["code"] == "context_length_exceeded"
    assert len(fake_vllm.requests) == 2 + len(parts)


async def test_top_k_beyond_what_a_backend_takes_is_a_422(app_url: str) -> None:
    error = assert_openai_error(await post(app_url, body(top_k=2**70)), 422)
    assert error["param"] == "top_k"
