"""Audio out through the app: every response_format, SSE framing and usage, speaking rate, loudness."""

from __future__ import annotations

import base64
import io
import json

import av
import httpx
import numpy as np
import pyloudnorm
import pytest

from tests.fakes.fake_vllm import FakeVLLM, Script, prompt_token_count

N_CODES = 48
SPEECH = "/v1/audio/speech"
MEDIA_TYPES = {
    "pcm": "audio/pcm",
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
}
FRAME_TOLERANCE_S = {
    "pcm": 0,
    "wav": 0,
    "flac": 0,
    "mp3": 1152 / 24000,
    "aac": 2048 / 24000,
    "opus": 0.02,
}  # aac: ADTS priming


def body(**fields: object) -> dict[str, object]:
    return {"input": "Hello there, how can I help you?", "voice": "husein"} | fields


def decoded_seconds(data: bytes, fmt: str) -> float:
    """Duration of a response body: pcm by size, the rest by decoding every frame with PyAV."""
    if fmt == "pcm":
        return len(data) / 2 / 24000
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return samples / stream.rate


@pytest.mark.parametrize("fmt", list(MEDIA_TYPES))
@pytest.mark.parametrize("stream", [True, False])
async def test_every_format_decodes_to_the_right_duration(app_url: str, fmt: str, stream: bool) -> None:
    async with httpx.AsyncClient(timeout=20) as client:
        response = await client.post(app_url + SPEECH, json=body(response_format=fmt, stream=stream))
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == MEDIA_TYPES[fmt]
    if not stream:
        assert int(response.headers["content-length"]) == len(response.content)
    expected = N_CODES * 480 / 24000
    assert abs(decoded_seconds(response.content, fmt) - expected) <= FRAME_TOLERANCE_S[fmt] + 1e-9


def parse_sse(raw: bytes) -> list[dict[str, object] | str]:
    """The ``data:`` payloads of an SSE body: JSON objects, or the literal ``[DONE]``."""
    text = raw.decode()
    assert text.endswith("\n\n")
    events: list[dict[str, object] | str] = []
    for block in text.strip("\n").split("\n\n"):
        assert block.startswith("data: "), block
        payload = block[len("data: ") :]
        events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


@pytest.mark.parametrize("fmt", ["pcm", "mp3"])
async def test_sse_events_carry_the_format_and_real_usage(
    app_url: str, fake_vllm: FakeVLLM, fmt: str
) -> None:
    async with httpx.AsyncClient(timeout=20) as client:
        response = await client.post(app_url + SPEECH, json=body(response_format=fmt, stream_format="sse"))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"].startswith("no-cache")
    assert response.headers["x-accel-buffering"] == "no"
    events = parse_sse(response.content)
    assert events[-1] == "[DONE]"
    done = events[-2]
    deltas = events[:-2]
    assert deltas and all(isinstance(e, dict) and e["type"] == "speech.audio.delta" for e in deltas)
    audio = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    expected = N_CODES * 480 / 24000
    assert abs(decoded_seconds(audio, fmt) - expected) <= FRAME_TOLERANCE_S[fmt] + 1e-9
    prompt = fake_vllm.requests[-1].body["prompt"]
    assert done == {
        "type": "speech.audio.done",
        "usage": {
            "input_tokens": prompt_token_count(prompt),
            "output_tokens": N_CODES,
            "total_tokens": prompt_token_count(prompt) + N_CODES,
        },
    }


async def test_sse_failure_after_audio_sends_one_error_event_and_no_done(
    app_url: str, fake_vllm: FakeVLLM
) -> None:
    # first window: 20 codes + 10 future at playback 0.4; the backend fails after 40 codes
    fake_vllm.script = Script(codes=list(range(400)), tokens_per_event=8, error_after_events=5)
    async with httpx.AsyncClient(timeout=20) as client:
        response = await client.post(app_url + SPEECH, json=body(stream_format="sse"))
    assert response.status_code == 200
    events = parse_sse(response.content)
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1)
    error = events[-1]
    assert isinstance(error, dict) and error["type"] == "error"
    assert error["error"]["type"] == "server_error" and error["error"]["message"]


async def test_raw_stream_failure_after_audio_aborts_the_body(app_url: str, fake_vllm: FakeVLLM) -> None:
    fake_vllm.script = Script(codes=list(range(400)), tokens_per_event=8, error_after_events=5)
    async with httpx.AsyncClient(timeout=20) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(app_url + SPEECH, json=body(response_format="pcm"))


@pytest.mark.parametrize(("field", "rate"), [("speed", 2.0), ("speaking_rate", 0.5), ("speed", 1.25)])
async def test_speaking_rate_scales_duration(app_url: str, field: str, rate: float) -> None:
    async with httpx.AsyncClient(timeout=20) as client:
        response = await client.post(app_url + SPEECH, json=body(**{field: rate}, stream=False))
    assert response.status_code == 200
    samples = len(response.content) // 2
    assert abs(samples - N_CODES * 480 / rate) <= 0.01 * N_CODES * 480 / rate


@pytest.mark.parametrize("rate", [0.25, 0.49, 2.01, 4.0])
async def test_speaking_rate_outside_range_is_422(app_url: str, rate: float) -> None:
    async with httpx.AsyncClient(timeout=20) as client:
        response = await client.post(app_url + SPEECH, json=body(speed=rate))
    assert response.status_code == 422
    assert response.json()["error"]["param"] == "speed"


async def test_loudness_normalization_and_fade(app_url: str) -> None:
    async with httpx.AsyncClient(timeout=20) as client:
        raw = await client.post(app_url + SPEECH, json=body(stream=False, stream_normalize=False))
        normalized = await client.post(app_url + SPEECH, json=body(stream=False))
    a = np.frombuffer(raw.content, dtype="<i2").astype(np.float64) / 32767
    b = np.frombuffer(normalized.content, dtype="<i2").astype(np.float64) / 32767
    assert len(a) == len(b) == N_CODES * 480
    assert a[0] == b[0] == 0.0  # fade-in starts from silence in both
    assert np.abs(b).max() < 1.0
    assert not np.array_equal(a, b)
    meter = pyloudnorm.Meter(24000, block_size=0.4)
    before, after = meter.integrated_loudness(a), meter.integrated_loudness(b)
    assert abs(after - -16.0) < 1.5 < abs(before - -16.0)  # TARGET_LOUDNESS_LUFS: K-weighted (LUFS)


@pytest.mark.parametrize("fmt", ["mp3", "opus"])
async def test_hanging_up_mid_encode_leaves_the_server_healthy(
    app_url: str, fake_vllm: FakeVLLM, fmt: str
) -> None:
    fake_vllm.script = Script(codes=list(range(1500)), tokens_per_event=25, tokens_per_s=500)
    async with httpx.AsyncClient(timeout=20) as client:
        for _ in range(3):
            async with client.stream("POST", app_url + SPEECH, json=body(response_format=fmt)) as response:
                assert response.status_code == 200
                async for _chunk in response.aiter_raw():
                    break
        await fake_vllm.wait_disconnected(timeout=2.0)
        fake_vllm.script = Script(codes=list(range(1000, 1048)), tokens_per_event=8)
        after = await client.post(app_url + SPEECH, json=body(response_format=fmt, stream=False))
    assert after.status_code == 200
    assert abs(decoded_seconds(after.content, fmt) - N_CODES * 480 / 24000) <= FRAME_TOLERANCE_S[fmt] + 1e-9
