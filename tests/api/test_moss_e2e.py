"""End to end on the tiny fixtures: the real MOSS LM stage (loader, prompt rows, batched frame engine)
and the tiny MOSS codec, served by the app as ``MODEL_FAMILIES`` loads them. Random weights: the frame
count is whatever the model samples (bounded by ``max_tokens``), so the checks are on shapes, usage,
protocols and reproducibility, not on sound."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import wave
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
from livekit.plugins import openai as lk_openai

from app.families.moss import history
from app.families.moss.family import MossFamily
from app.main import create_app
from tests.api.conftest import http_settings, serve_app
from tests.api.test_second_family import FORMATS, decoded
from tests.api.test_speech_http import assert_openai_error
from tests.fakes.fake_vllm import FakeVLLM

SPEECH = "/v1/audio/speech"
MODEL = "moss-tts-realtime"
FRAME = 1920
TEXT = "Hi there"  # 0.8 s at the slow pace: fits CAP, so one generation (a longer text is cut into parts)
CAP = 10  # frames per request: the random model rarely samples EOS


def speech(**fields: object) -> dict[str, object]:
    return {"model": MODEL, "input": TEXT, "max_tokens": CAP} | fields


class App:
    def __init__(self, url: str, family: MossFamily) -> None:
        self.url = url
        self.family = family


async def serve_real(settings_overrides: dict[str, object], base: dict[str, object]) -> AsyncIterator[App]:
    settings = http_settings(**(base | settings_overrides))  # type: ignore[arg-type]
    app = create_app(settings)
    async with serve_app(app) as url:
        engine = app.state.engine
        (family,) = [f for f in engine.families if isinstance(f, MossFamily)]
        yield App(url, family)


@pytest.fixture
async def both(
    tiny_codec_dir: Path, tiny_moss_codec_dir: Path, moss_tts_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path
) -> AsyncIterator[App]:
    base: dict[str, object] = {"codec_dir": tiny_codec_dir, "lm_url": fake_vllm.url}
    overrides: dict[str, object] = {
        "MODEL_FAMILIES": ["neucodec", "moss"],
        "MOSS_TTS_MODEL": str(moss_tts_dir),
        "MOSS_CODEC_MODEL": str(tiny_moss_codec_dir),
        "INTERLEAVE_STORE": "memory",
        "VOICES_DIR": str(tmp_path / "voices"),
        "MOSS_CACHE_POSITIONS": 600,  # the window a request may take (the tiny backbone's is 4096)
    }
    async for served in serve_real(overrides, base):
        yield served


async def test_models_list_the_family(both: App) -> None:
    async with httpx.AsyncClient(base_url=both.url, timeout=30) as client:
        ids = [m["id"] for m in (await client.get("/v1/models")).json()["data"]]
        ready = (await client.get("/ready")).json()
    assert MODEL in ids and ready["checks"]["moss.lm"] is True and ready["checks"]["moss.codec"] is True


@pytest.mark.parametrize("fmt", FORMATS)
async def test_every_format_streams_real_frames(both: App, fmt: str) -> None:
    async with httpx.AsyncClient(base_url=both.url, timeout=60) as client:
        response = await client.post(SPEECH, json=speech(response_format=fmt, stream_normalize=False))
    assert response.status_code == 200, response.text
    audio, rate = decoded(response.content, fmt)
    assert 0 < len(audio) / rate <= CAP * FRAME / 24000 + 0.1
    if fmt == "pcm":
        assert len(audio) % FRAME == 0  # whole 80 ms frames


async def test_sse_usage_counts_the_frames_and_a_seed_repeats_them(both: App) -> None:
    async with httpx.AsyncClient(base_url=both.url, timeout=60) as client:
        runs = [await client.post(SPEECH, json=speech(stream_format="sse", seed=7)) for _ in range(2)]
        other = await client.post(SPEECH, json=speech(seed=8, stream_normalize=False, response_format="pcm"))
        again = await client.post(SPEECH, json=speech(seed=8, stream_normalize=False, response_format="pcm"))
    audios = []
    for response in runs:
        events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
        audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
        usage = events[-1]["usage"]
        assert events[-1]["type"] == "speech.audio.done" and 1 <= usage["output_tokens"] <= CAP
        assert len(audio) == usage["output_tokens"] * FRAME * 2 and usage["input_tokens"] > 0
        audios.append(audio)
    # the same seed, the same frames: the same audio, to the last bit or so (the codec may batch the two
    # requests' decodes differently, which is exact only to float rounding)
    first, second = (np.frombuffer(audio, dtype="<i2").astype(np.int32) for audio in audios)
    assert len(first) == len(second) and int(np.abs(first - second).max()) <= 2
    third, fourth = (np.frombuffer(r.content, dtype="<i2").astype(np.int32) for r in (other, again))
    assert len(third) == len(fourth) and int(np.abs(third - fourth).max()) <= 2


async def test_its_codec_batches_are_counted_apart_from_neucodecs(both: App) -> None:
    async with httpx.AsyncClient(base_url=both.url, timeout=60) as client:
        assert (await client.post(SPEECH, json=speech(stream_normalize=False))).status_code == 200
        text = (await client.get("/metrics")).text
    moss = [line for line in text.splitlines() if line.startswith("tts_codec_batches_total{")]
    assert any('queue="moss_decode"' in line and not line.endswith(" 0.0") for line in moss), moss
    assert not any('queue="decode"' in line and not line.endswith(" 0.0") for line in moss), moss


async def test_errors_come_before_audio(both: App) -> None:
    async with httpx.AsyncClient(base_url=both.url, timeout=30) as client:
        assert_openai_error(await client.post(SPEECH, json=speech(voice="nobody")), 400, "voice")
        assert_openai_error(await client.post(SPEECH, json=speech(top_p=0)), 422, "top_p")
        assert_openai_error(await client.post(SPEECH, json=speech(max_tokens=40000)), 422, "max_tokens")


async def test_a_long_input_is_spoken_whole_in_parts(both: App) -> None:
    """Three parts of at most 20 frames each (1.6 s: 16 characters at the slow pace), every frame of
    every part in the audio, one crossfade at each join, usage over all parts."""
    text = "Hello there. How are you today? Fine."
    body = speech(input=text, max_tokens=20, seed=3, stream_format="sse")
    async with httpx.AsyncClient(base_url=both.url, timeout=60) as client:
        response = await client.post(SPEECH, json=body)
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    usage = events[-1]["usage"]
    assert events[-1]["type"] == "speech.audio.done" and 20 < usage["output_tokens"] <= 3 * 20
    joins = 2 * round(both.family.settings.LONG_INPUT_CROSSFADE_MS * 24)  # "How are you", "today? Fine."
    assert len(audio) == (usage["output_tokens"] * FRAME - joins) * 2 and usage["input_tokens"] > 0


async def test_a_client_that_leaves_frees_the_row_and_the_stream(both: App) -> None:
    client = httpx.AsyncClient(base_url=both.url, timeout=60)
    async with client, client.stream("POST", SPEECH, json=speech(max_tokens=1500)) as response:
        async for _ in response.aiter_bytes():
            break
    assert both.family.lm is not None and both.family.codec is not None
    engine = both.family.lm.engine
    for _ in range(300):
        if getattr(engine, "active", 0) == 0 and both.family.codec.live_streams == 0:
            break
        await asyncio.sleep(0.02)
    assert getattr(engine, "active", None) == 0 and both.family.codec.live_streams == 0
    steps = getattr(engine, "steps", None)
    assert steps is not None and steps < 1500  # left long before its 1500 frames
    await asyncio.sleep(0.2)
    assert getattr(engine, "steps", None) == steps  # and nothing runs on


async def test_voice_conversion_and_registered_voices(both: App, reference_wav: bytes) -> None:
    async with httpx.AsyncClient(base_url=both.url, timeout=60) as client:
        files = {"reference_audio": ("ref.wav", reference_wav, "audio/wav")}
        vc = await client.post(
            "/v1/audio/vc", data={"model": MODEL, "generate_text": TEXT, "max_tokens": str(CAP)}, files=files
        )
        registered = await client.post(
            "/v1/audio/voices", data={"name": "clip"}, files={"audio_sample": ("a.wav", reference_wav)}
        )
        spoken = await client.post(SPEECH, json=speech(voice="clip"))
    assert vc.status_code == 200 and len(vc.content) > 0, vc.text
    assert registered.status_code == 201, registered.text
    assert spoken.status_code == 200 and len(spoken.content) > 0, spoken.text


async def test_history_goes_into_the_prompt(both: App) -> None:
    """A finished earlier turn on the id (stored as the family stores one) is in the next prompt."""
    frames = np.random.default_rng(1).integers(0, 1024, size=(6, 16), dtype=np.int64)
    await both.family.interleave.commit_turn("room", history.record("default", "Good morning.", frames), 0)
    async with httpx.AsyncClient(base_url=both.url, timeout=60) as client:
        warm = await client.post(SPEECH, json=speech(), headers={"X-Interleave-Id": "room"})
        cold = await client.post(SPEECH, json=speech(), headers={"X-Interleave-Id": "elsewhere"})
    assert warm.status_code == cold.status_code == 200
    assert warm.headers["x-interleave-turns"] == "1" and warm.headers["x-interleave-tokens"] == "6"
    assert cold.headers["x-interleave-turns"] == "0"


@pytest.fixture
async def moss_only(
    tiny_codec_dir: Path, tiny_moss_codec_dir: Path, moss_tts_dir: Path, fake_vllm: FakeVLLM
) -> AsyncIterator[App]:
    base: dict[str, object] = {"codec_dir": tiny_codec_dir, "lm_url": fake_vllm.url}
    overrides: dict[str, object] = {
        "MODEL_FAMILIES": ["moss"],
        "MOSS_TTS_MODEL": str(moss_tts_dir),
        "MOSS_CODEC_MODEL": str(tiny_moss_codec_dir),
        "MOSS_DEFAULT_MAX_TOKENS": CAP,
    }
    async for served in serve_real(overrides, base):
        yield served


async def test_openai_sdk_and_livekit_reach_it_by_openai_names(moss_only: App) -> None:
    async with openai.AsyncOpenAI(api_key="x", base_url=moss_only.url + "/v1", max_retries=0) as sdk:
        whole = await sdk.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format="wav")
    with wave.open(io.BytesIO(whole.content)) as wav:
        frames = wav.readframes(10**9)
        assert wav.getframerate() == 24000 and 0 < len(frames) <= CAP * FRAME * 2
    tts = lk_openai.TTS(base_url=moss_only.url + "/v1", api_key="x", model="gpt-4o-mini-tts", voice="ash")
    try:
        async with tts.synthesize(TEXT) as stream:
            pieces = [event.frame async for event in stream]
    finally:
        await tts.aclose()
    assert {(f.sample_rate, f.num_channels) for f in pieces} == {(24000, 1)}
    assert 0 < sum(f.samples_per_channel for f in pieces) / 24000 <= CAP * FRAME / 24000 + 0.1


async def test_later_parts_of_an_admitted_long_input_wait_when_the_engine_queue_is_full(
    tiny_codec_dir: Path,
    tiny_moss_codec_dir: Path,
    moss_tts_dir: Path,
    fake_vllm: FakeVLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One engine row and no wait list: the queue is full whenever a row runs. A long input's second part
    is held back until a new request has taken the row its first part freed, then submitted: it waits its
    turn (the listener hears every part, no error event), while a new request that comes meanwhile is
    refused (429, before any audio)."""
    base: dict[str, object] = {"codec_dir": tiny_codec_dir, "lm_url": fake_vllm.url}
    overrides: dict[str, object] = {
        "MODEL_FAMILIES": ["moss"],
        "MOSS_TTS_MODEL": str(moss_tts_dir),
        "MOSS_CODEC_MODEL": str(tiny_moss_codec_dir),
        "MOSS_CACHE_ROWS": 600,
        "MOSS_MAX_BATCH": 1,
        "INTERLEAVE_STORE": "memory",
        "VOICES_DIR": str(tmp_path / "voices"),
    }
    async with asynccontextmanager(serve_real)(overrides, base) as served:
        assert served.family.lm is not None
        engine = served.family.lm.engine
        monkeypatch.setattr(engine, "max_waiting", 0)
        real_stream = engine.stream
        calls = 0
        second_part_ready, submit_second_part = asyncio.Event(), asyncio.Event()

        def stream(job: object, **options: object) -> AsyncIterator[object]:
            nonlocal calls
            calls += 1
            return held(job, options) if calls == 2 else real_stream(job, **options)  # type: ignore[arg-type]

        async def held(job: object, options: dict[str, object]) -> AsyncIterator[object]:
            second_part_ready.set()
            await submit_second_part.wait()
            async with contextlib.aclosing(real_stream(job, **options)) as frames:  # type: ignore[arg-type]
                async for block in frames:
                    yield block

        monkeypatch.setattr(engine, "stream", stream)
        long_text = "Hello there. How are you today? Fine."
        async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:
            listener = asyncio.create_task(
                client.post(SPEECH, json=speech(input=long_text, max_tokens=20, seed=3, stream_format="sse"))
            )
            await asyncio.wait_for(second_part_ready.wait(), 30)  # part 1 generated, its row gone
            async with client.stream("POST", SPEECH, json=speech(max_tokens=60)) as newcomer:
                assert newcomer.status_code == 200  # it holds the engine's only row now
                refused = await client.post(SPEECH, json=speech())
                submit_second_part.set()
                await asyncio.sleep(0.2)  # the second part is submitted to the full engine now
                await newcomer.aread()
            response = await listener
    assert_openai_error(refused, 429)
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    assert [e["type"] for e in events if e["type"] != "speech.audio.delta"] == ["speech.audio.done"], events[
        -1
    ]
    assert events[-1]["usage"]["output_tokens"] > 20, "every part was spoken"
    assert calls == 5  # the three parts, the newcomer and the request refused
