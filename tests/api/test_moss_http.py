"""The MOSS family served by the unchanged HTTP layer (MODEL_FAMILIES=neucodec,moss), with the stand-in
LM stage on the tiny MOSS codec: formats, SSE, VC, registered voices, errors, disconnect, multi-turn."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import wave
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from livekit.plugins import openai as lk_openai

from app.config import Settings
from app.core.family import FamilySpec, ModelFamily
from app.families.moss.family import MossFamily
from app.interleave.service import Interleave
from app.main import create_app
from app.observability.metrics import Metrics
from app.synthesis import engine as engine_module
from tests.api.conftest import REFERENCE_TEXT, http_settings, serve_app
from tests.api.test_second_family import FORMATS, TOLERANCE_S, decoded, pcm_of
from tests.api.test_speech_http import assert_openai_error
from tests.fakes.fake_moss import FakeFrameEngine, FakePrompter, fake_lm
from tests.fakes.fake_vllm import FakeVLLM

SPEECH = "/v1/audio/speech"
MODEL = "moss-tts-realtime"
TEXT = "one two three four five"  # 5 words: 10 frames from the stand-in engine
FRAME = 1920


@dataclass
class Served:
    url: str
    engine: FakeFrameEngine
    prompter: FakePrompter
    family: MossFamily


def _serve(settings: Settings) -> AbstractAsyncContextManager[str]:
    return serve_app(create_app(settings))


async def serve_moss(
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    max_positions: int = 4096,
    serve: Callable[[Settings], AbstractAsyncContextManager[str]] = _serve,
) -> AsyncIterator[Served]:
    """The app with its ``moss`` family built on the stand-ins (``build_family`` patched for this test),
    served by ``serve`` (uvicorn's defaults unless given)."""
    engine, prompter = FakeFrameEngine(), FakePrompter()
    built: list[MossFamily] = []
    real = engine_module.build_family

    def build(spec: FamilySpec, settings: Any, interleave: Interleave, metrics: Metrics) -> ModelFamily:
        if spec.name != "moss":
            return real(spec, settings, interleave, metrics)
        family = MossFamily(
            settings, interleave, metrics, lm_loader=lambda s, d: fake_lm(engine, prompter, max_positions)
        )
        built.append(family)
        return family

    monkeypatch.setattr(engine_module, "build_family", build)
    async with serve(settings) as url:
        yield Served(url, engine, prompter, built[0])
    assert engine.closed and engine.open_rows == 0


def settings_for(
    codec_dir: Path, moss_codec_dir: Path, lm_url: str, tmp_path: Path, **overrides: object
) -> Settings:
    values: dict[str, object] = {
        "MODEL_FAMILIES": ["neucodec", "moss"],
        "MOSS_CODEC_MODEL": str(moss_codec_dir),
        "INTERLEAVE_STORE": "memory",
        "VOICES_DIR": str(tmp_path / "voices"),
    }
    return http_settings(codec_dir, lm_url, **(values | overrides))


@pytest.fixture
async def served(
    monkeypatch: pytest.MonkeyPatch,
    tiny_codec_dir: Path,
    tiny_moss_codec_dir: Path,
    fake_vllm: FakeVLLM,
    tmp_path: Path,
) -> AsyncIterator[Served]:
    settings = settings_for(tiny_codec_dir, tiny_moss_codec_dir, fake_vllm.url, tmp_path)
    async for served in serve_moss(monkeypatch, settings):
        yield served


def speech(**fields: object) -> dict[str, object]:
    return {"model": MODEL, "input": TEXT} | fields


async def test_models_voices_and_readiness_list_the_family(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=20) as client:
        models = [m["id"] for m in (await client.get("/v1/models")).json()["data"]]
        voices = [v["id"] for v in (await client.get("/v1/audio/voices")).json()["voices"]]
        ready = await client.get("/ready")
    assert models[0] == "TTS-model" and {MODEL, "OpenMOSS-Team/MOSS-TTS-Realtime", "tts-1"} <= set(models)
    assert "default" in voices
    assert ready.status_code == 200
    assert ready.json()["checks"]["moss.lm"] is True and ready.json()["checks"]["moss.codec"] is True


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("stream", [True, False])
async def test_every_format_carries_the_frames(served: Served, fmt: str, stream: bool) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=20) as client:
        response = await client.post(SPEECH, json=speech(response_format=fmt, stream=stream, voice="alloy"))
    assert response.status_code == 200, response.text
    audio, rate = decoded(response.content, fmt)
    assert abs(len(audio) / rate - 10 * FRAME / 24000) <= TOLERANCE_S[fmt] + 1e-9
    assert served.prompter.calls[-1].reference is None  # alloy: an alias of the default voice


async def test_sse_usage_counts_frames(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=20) as client:
        response = await client.post(SPEECH, json=speech(stream_format="sse"))
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    assert len(audio) == 10 * FRAME * 2
    assert events[-1]["type"] == "speech.audio.done"
    assert events[-1]["usage"] == {"input_tokens": 15, "output_tokens": 10, "total_tokens": 25}


async def test_speed_applies_and_sampling_fields_reach_the_engine(served: Served) -> None:
    served.engine.frames = 10  # "one" fits 8 frames (0.3 s at the slow pace): one generation, capped
    async with httpx.AsyncClient(base_url=served.url, timeout=20) as client:
        plain = await client.post(SPEECH, json=speech(input="one", stream_normalize=False))
        fast = await client.post(
            SPEECH,
            json=speech(
                input="one",
                stream_normalize=False,
                speed=2.0,
                temperature=0.3,
                top_p=0.5,
                top_k=7,
                seed=9,
                max_tokens=8,
            ),
        )
    assert abs(len(pcm_of(fast.content)) / len(pcm_of(plain.content)) - 0.5 * 8 / 10) < 0.03
    sampling = served.engine.jobs[-1].sampling
    assert (sampling.temperature, sampling.top_p, sampling.top_k, sampling.seed) == (0.3, 0.5, 7, 9)
    assert served.engine.jobs[-1].max_frames == 8 and served.engine.jobs[0].sampling.top_k == 30


async def test_errors_come_before_the_first_byte(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=20) as client:
        unknown = assert_openai_error(await client.post(SPEECH, json=speech(voice="husein")), 400, "voice")
        assert "default" in str(unknown["message"])
        assert_openai_error(await client.post(SPEECH, json=speech(temperature=5)), 422, "temperature")
        assert_openai_error(await client.post(SPEECH, json=speech(max_tokens=40000)), 422, "max_tokens")
        served.engine.full = True
        assert_openai_error(await client.post(SPEECH, json=speech()), 503)
        served.engine.full = False
    assert served.family.codec is not None and served.family.codec.live_streams == 0


async def rows_closed(served: Served) -> None:
    """Wait (up to 4 s) until the engine has no open row."""
    for _ in range(200):
        if served.engine.open_rows == 0:
            return
        await asyncio.sleep(0.02)


async def test_a_client_that_leaves_stops_the_engine_row(served: Served) -> None:
    served.engine.delay_s = 0.02
    client = httpx.AsyncClient(base_url=served.url, timeout=20)
    async with client, client.stream("POST", SPEECH, json=speech(input=" ".join(["word"] * 50))) as response:
        async for _ in response.aiter_bytes():
            break
    await rows_closed(served)
    assert served.engine.open_rows == 0 and served.engine.finished_rows == 1
    assert served.family.codec is not None and served.family.codec.live_streams == 0


LONG = "One two three. Four five six. Seven eight, nine ten eleven twelve."  # 5 parts of 20 frames at most


async def test_a_long_input_is_one_response_with_usage_over_its_parts(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=20) as client:
        body = speech(input=LONG, max_tokens=20, seed=5, stream_format="sse", stream_normalize=False)
        response = await client.post(SPEECH, json=body)
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    jobs = served.engine.jobs
    assert [len(job.text_tail) for job in jobs] == [3, 3, 2, 3, 1]  # the words of each part, in order
    frames = sum(len(served.engine.frames_for(job)) for job in jobs)
    assert frames == 12 * 2 and len(audio) == (frames * FRAME - 4 * 480) * 2  # a 20 ms crossfade per join
    rows = sum(len(job.prefill) for job in jobs)
    assert events[-1]["type"] == "speech.audio.done"
    usage = {"input_tokens": rows, "output_tokens": frames, "total_tokens": rows + frames}
    assert events[-1]["usage"] == usage


async def test_a_client_that_leaves_a_long_input_starts_no_further_part(served: Served) -> None:
    served.engine.delay_s = 0.05
    client = httpx.AsyncClient(base_url=served.url, timeout=20)
    body = speech(input=LONG, max_tokens=20, stream_normalize=False)
    async with client, client.stream("POST", SPEECH, json=body) as response:
        async for _ in response.aiter_bytes():
            break
    await rows_closed(served)
    await asyncio.sleep(0.3)  # time for a part that would still start
    assert served.engine.open_rows == 0 and 1 <= len(served.engine.jobs) <= 2  # of 5 parts
    assert served.family.codec is not None and served.family.codec.live_streams == 0


async def test_voice_conversion_needs_no_transcript(served: Served, reference_wav: bytes) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
        files = {"reference_audio": ("ref.wav", reference_wav, "audio/wav")}
        moss = await client.post(
            "/v1/audio/vc",
            data={"model": MODEL, "generate_text": TEXT, "response_format": "wav"},
            files=files,
        )
        neucodec = await client.post("/v1/audio/vc", data={"generate_text": TEXT}, files=files)
    assert moss.status_code == 200, moss.text
    reference = served.prompter.calls[-1].reference
    assert reference is not None and reference.shape == (34, 16)  # 2.79 s of clip at 12.5 frames per second
    assert_openai_error(neucodec, 422, "reference_text")


async def test_registered_voices_serve_both_families(served: Served, reference_wav: bytes) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
        files = {"audio_sample": ("a.wav", reference_wav, "audio/wav")}
        both = await client.post(
            "/v1/audio/voices", data={"name": "both", "reference_text": REFERENCE_TEXT}, files=files
        )
        mossonly = await client.post("/v1/audio/voices", data={"name": "mossonly"}, files=files)
        assert both.status_code == mossonly.status_code == 201, (both.text, mossonly.text)
        assert mossonly.json()["reference_text"] == "" and mossonly.json()["duration_s"] == pytest.approx(
            2.79
        )
        for name in ("both", "mossonly"):
            spoken = await client.post(SPEECH, json=speech(voice=name))
            assert spoken.status_code == 200, spoken.text
            reference = served.prompter.calls[-1].reference
            assert reference is not None and reference.shape == (34, 16)
        assert (await client.post(SPEECH, json={"input": "hi", "voice": "both"})).status_code == 200
        refused = await client.post(SPEECH, json={"input": "hi", "voice": "mossonly"})  # NeuCodec: no codes
    assert assert_openai_error(refused, 400, "voice")["code"] == "voice_not_available_for_model"


async def test_an_interleave_id_carries_the_history(served: Served) -> None:
    room = {"X-Interleave-Id": "room-7"}
    async with httpx.AsyncClient(base_url=served.url, timeout=20) as client:
        first = await client.post(SPEECH, json=speech(input="hello there"), headers=room)
        second = await client.post(SPEECH, json=speech(input="and again"), headers=room)
        info = (await client.get("/v1/audio/interleave/room-7")).json()
    assert first.headers["x-interleave-turns"] == "0" and second.headers["x-interleave-turns"] == "1"
    (turn,) = served.prompter.calls[-1].history
    assert turn.text_ids == served.prompter.text_ids("hello there") and turn.frames.shape == (4, 16)
    assert [(t["voice"], t["seconds"]) for t in info["turns"]] == [
        ("moss:default", 0.32),
        ("moss:default", 0.32),
    ]


@pytest.fixture
async def moss_first(
    monkeypatch: pytest.MonkeyPatch,
    tiny_codec_dir: Path,
    tiny_moss_codec_dir: Path,
    fake_vllm: FakeVLLM,
    tmp_path: Path,
) -> AsyncIterator[Served]:
    """MODEL_FAMILIES=moss: the family answers to OpenAI's model names too."""
    settings = settings_for(
        tiny_codec_dir, tiny_moss_codec_dir, fake_vllm.url, tmp_path, MODEL_FAMILIES=["moss"]
    )
    async for served in serve_moss(monkeypatch, settings):
        yield served


async def test_the_openai_sdk_speaks_through_the_family(moss_first: Served) -> None:
    async with openai.AsyncOpenAI(api_key="x", base_url=moss_first.url + "/v1", max_retries=0) as sdk:
        whole = await sdk.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="wav")
        async with sdk.audio.speech.with_streaming_response.create(
            model="gpt-4o-mini-tts", voice="nova", input=TEXT, response_format="pcm"
        ) as response:
            streamed = b"".join([chunk async for chunk in response.iter_bytes()])
    with wave.open(io.BytesIO(whole.content)) as wav:
        assert wav.getframerate() == 24000 and len(wav.readframes(10**9)) == 10 * FRAME * 2
    assert len(streamed) == 10 * FRAME * 2 and len(moss_first.engine.jobs) == 2


async def test_livekit_speaks_through_the_family_with_a_model_alias(moss_first: Served) -> None:
    tts = lk_openai.TTS(base_url=moss_first.url + "/v1", api_key="x", model="gpt-4o-mini-tts", voice="ash")
    try:
        async with tts.synthesize(TEXT) as stream:
            frames = [event.frame async for event in stream]
    finally:
        await tts.aclose()
    assert {(f.sample_rate, f.num_channels) for f in frames} == {(24000, 1)}
    seconds = sum(f.samples_per_channel for f in frames) / 24000
    assert abs(seconds - 10 * FRAME / 24000) <= 1152 / 24000 + 0.01  # mp3 over SSE; LiveKit's end marker
    assert moss_first.engine.jobs
