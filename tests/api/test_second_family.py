"""A third model family, added as a real one is (its folder, tests/fakes/tone/, and one registry line),
served end to end by the unchanged HTTP layer."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import av
import httpx
import numpy as np
import pyloudnorm
import pytest

from app.audio.decoder_pool import ReferenceDecoder
from app.core.settings import ServerSettings
from app.main import create_app
from app.synthesis.service import SpeechService
from tests.api.conftest import serve_app
from tests.fakes import tone as tone_package
from tests.fakes.fake_vllm import FakeVLLM
from tests.fakes.tone.family import CHUNK, MODEL, ToneFamily
from tests.fakes.tone.serving import ENV_BLOCK, ToneServerSettings, tone_engine, tone_settings

SPEECH = "/v1/audio/speech"
TEXT = "one two three four five"  # 5 words: 20 frames of 80 ms, 1.6 s of tone
SECONDS = 20 * CHUNK / 24000
FORMATS = ["pcm", "wav", "mp3", "opus", "aac", "flac"]
TOLERANCE_S = {"pcm": 0, "wav": 0, "flac": 0, "mp3": 1152 / 24000, "aac": 2048 / 24000, "opus": 0.02}


def test_the_family_is_one_folder_a_registry_line_and_its_settings_block() -> None:
    keys = [line.split("=")[0] for line in ENV_BLOCK.read_text().splitlines() if line[:1].isalpha()]
    own = set(tone_package.SPEC.settings.model_fields) - set(ServerSettings.model_fields)
    assert set(keys) == own == {"TONE_FRAMES_PER_WORD", "TONE_MAX_FRAMES", "TONE_FRAME_DELAY_S"}
    defaults = ToneServerSettings(_env_file=ENV_BLOCK)
    assert (defaults.TONE_FRAMES_PER_WORD, defaults.TONE_MAX_FRAMES) == (4, 100)  # type: ignore[attr-defined]


@pytest.fixture
async def served(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> AsyncIterator[tuple[str, ToneFamily]]:
    engine, tone = tone_engine(tone_settings(tiny_codec_dir, fake_vllm.url))
    settings = engine.settings
    async with serve_app(create_app(settings, engine=engine)) as url:
        yield url, tone
    assert tone.started and tone.closed  # the app's lifespan starts and closes every family


def decoded(data: bytes, fmt: str) -> tuple[np.ndarray, int]:
    """The response body as float32 samples and their rate (Opus decodes at 48 kHz)."""
    if fmt == "pcm":
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768, 24000
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        frames = [frame.to_ndarray().reshape(-1) for frame in container.decode(stream)]
        rate = stream.rate
    audio = np.concatenate(frames)
    return audio.astype(np.float32) / (32768 if audio.dtype == np.int16 else 1), rate


def pcm_of(data: bytes) -> np.ndarray:
    """A pcm response body as float32 samples at 24 kHz."""
    return decoded(data, "pcm")[0]


def speech(**fields: object) -> dict[str, object]:
    return {"model": MODEL, "input": TEXT, "voice": "high"} | fields


async def test_models_lists_every_family(served: tuple[str, ToneFamily]) -> None:
    url, _ = served
    async with httpx.AsyncClient(timeout=20) as client:
        models = (await client.get(url + "/v1/models")).json()
        voices = (await client.get(url + "/v1/audio/voices")).json()["voices"]
        ready = await client.get(url + "/ready")
    ids = [model["id"] for model in models["data"]]
    assert ids[0] == "TTS-model" and MODEL in ids and "tts-1" in ids  # the default family stays first
    assert {"low", "high"} <= {voice["id"] for voice in voices}
    assert ready.status_code == 200 and ready.json()["checks"]["tone.tone"] is True


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("stream", [True, False])
async def test_every_format_streams_the_family_audio(
    served: tuple[str, ToneFamily], fmt: str, stream: bool
) -> None:
    url, tone = served
    async with httpx.AsyncClient(timeout=20) as client:
        response = await client.post(url + SPEECH, json=speech(response_format=fmt, stream=stream))
    assert response.status_code == 200, response.text
    assert response.headers["x-tone-hz"] == "440.0"  # the family's own headers reach the client
    audio, rate = decoded(response.content, fmt)
    assert abs(len(audio) / rate - SECONDS) <= TOLERANCE_S[fmt] + 1e-9
    second = audio[rate // 4 : rate // 4 + rate]  # 1 s past any codec priming: 1 Hz per bin
    assert abs(int(np.argmax(np.abs(np.fft.rfft(second)))) - 440) <= 2  # its tone, not NeuCodec's
    job = tone.jobs[-1]
    assert (job.model, job.voice, job.text) == (MODEL, "high", TEXT)
    assert job.sampling.max_tokens == 100  # the family's default, resolved by planning


async def test_sse_carries_the_family_audio_and_usage(served: tuple[str, ToneFamily]) -> None:
    url, _ = served
    async with httpx.AsyncClient(timeout=20) as client:
        response = await client.post(url + SPEECH, json=speech(stream_format="sse"))
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    assert len(audio) == 20 * CHUNK * 2
    done = events[-1]
    assert done["type"] == "speech.audio.done"
    assert done["usage"] == {"input_tokens": 5, "output_tokens": 20, "total_tokens": 25}


async def test_speed_and_loudness_apply_to_the_family(served: tuple[str, ToneFamily]) -> None:
    url, _ = served
    async with httpx.AsyncClient(timeout=20) as client:
        plain = await client.post(url + SPEECH, json=speech(stream_normalize=False))
        faster = await client.post(url + SPEECH, json=speech(stream_normalize=False, speed=2.0))
        louder = await client.post(url + SPEECH, json=speech(stream_normalize=True))
    plain_pcm, fast_pcm, loud_pcm = (pcm_of(r.content) for r in (plain, faster, louder))
    assert abs(len(fast_pcm) / len(plain_pcm) - 0.5) < 0.02
    meter = pyloudnorm.Meter(24000)
    before = meter.integrated_loudness(plain_pcm.astype(np.float64))
    after = meter.integrated_loudness(loud_pcm.astype(np.float64))
    assert abs(after - -16.0) < 1.5 < abs(before - -16.0)


async def test_capabilities_the_family_lacks_are_400s(
    served: tuple[str, ToneFamily], reference_wav: bytes
) -> None:
    url, tone = served
    async with httpx.AsyncClient(timeout=20) as client:
        turn = await client.post(url + SPEECH, json=speech(interleave_id="room-1"))
        vc = await client.post(
            url + "/v1/audio/vc",
            data={"model": MODEL, "reference_text": "hello", "generate_text": "hi there"},
            files={"reference_audio": ("ref.wav", reference_wav, "audio/wav")},
        )
        unknown_voice = await client.post(url + SPEECH, json=speech(voice="husein"))
        refused = await client.post(url + SPEECH, json=speech(input="a forbidden word"))
        unknown_model = await client.post(url + SPEECH, json=speech(model="no-such-model"))
        default = await client.post(url + SPEECH, json={"input": "hello", "model": "tts-1"})
    for response, capability in ((turn, "multi_turn"), (vc, "reference_voice")):
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert capability in error["message"] and error["param"] == "model"
        assert error["code"] == "unsupported_capability"
    assert unknown_voice.status_code == 400 and "low" in unknown_voice.json()["error"]["message"]
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "input"
    assert unknown_model.status_code == 404
    assert default.status_code == 200 and "x-tone-hz" not in default.headers  # OpenAI names: default family
    assert all(job.text != "a forbidden word" for job in tone.jobs)


async def test_a_client_that_leaves_stops_the_family_stream(served: tuple[str, ToneFamily]) -> None:
    url, tone = served
    tone.frame_delay_s = 0.02  # 100 frames in 2 s: still running when the client leaves
    long_text = " ".join(["word"] * 25)  # 100 frames, 8 s
    client = httpx.AsyncClient(timeout=20)
    async with client, client.stream("POST", url + SPEECH, json=speech(input=long_text)) as response:
        async for _ in response.aiter_bytes():
            break  # first audio, then gone
    for _ in range(200):
        if tone.utterances[-1].closed_early:
            break
        await asyncio.sleep(0.02)
    assert tone.utterances[-1].closed_early


async def test_the_service_runs_without_a_socket(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    """The speech service takes request fields, not a Starlette request: driven here with no server."""
    from app.api.schemas import SpeechRequest
    from app.core.stats import UtteranceStats

    engine, _ = tone_engine(tone_settings(tiny_codec_dir, fake_vllm.url))
    await engine.start()
    try:
        stats = UtteranceStats()
        synthesis = await SpeechService(
            engine, ReferenceDecoder(threads=1, timeout_s=10, min_s=1, max_s=30)
        ).speech(SpeechRequest(**speech(response_format="wav")), stats)
        body = b"".join([part async for part in synthesis.encoded()])
    finally:
        await engine.close()
    assert body[:4] == b"RIFF" and stats.samples == 20 * CHUNK and stats.finish_reason == "stop"
