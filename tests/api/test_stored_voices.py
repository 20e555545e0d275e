"""What reaches a voice store is what loads back, and the shared caches stay bounded, end to end on both
stores (files and the project's Redis) and both families: finite but absurd samples, codes an encoder
gets wrong, and the shared reference cache's size."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest
import redis
import soundfile as sf

from app.__main__ import server_options
from app.audio.io import load_reference
from app.codec.shared_codes import RedisSharedCodes
from app.config import Settings
from app.main import create_app
from tests.api.conftest import REFERENCE_TEXT, http_settings, serve_app
from tests.api.test_moss_http import serve_moss
from tests.api.test_speech_http import assert_openai_error
from tests.api.test_voices_http import store_settings  # noqa: F401  (the file and redis stores)
from tests.fakes.fake_vllm import FakeVLLM
from tests.interleave.conftest import REDIS_URL, redis_prefix  # noqa: F401  (a test's own Redis keys)

VOICES, VC = "/v1/audio/voices", "/v1/audio/vc"
MOSS = "moss-tts-realtime"


def float_wav(value: float, rate: int = 16000) -> bytes:
    """2 s of a quiet tone as a 32-bit float wav, one sample of it set to ``value``."""
    t = np.arange(2 * rate) / rate
    samples = (0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    samples[rate] = value
    out = io.BytesIO()
    sf.write(out, samples, rate, format="WAV", subtype="FLOAT")
    return out.getvalue()


def served(
    family: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> AbstractAsyncContextManager[object]:
    """The app as ``python -m app`` serves it: NeuCodec on the fake vLLM, or MOSS on its stand-in LM stage
    and the tiny MOSS codec (a real encoder)."""
    if family == "moss":
        return asynccontextmanager(serve_moss)(monkeypatch, settings)
    return _neucodec(settings)


@asynccontextmanager
async def _neucodec(settings: Settings) -> AsyncIterator[object]:
    options = server_options(settings) | {"host": "127.0.0.1", "port": 0, "log_level": "warning"}
    async with serve_app(create_app(settings), **options) as url:
        yield type("Served", (), {"url": url})()


def family_settings(
    family: str,
    codec_dir: Path,
    moss_codec_dir: Path,
    fake: FakeVLLM,
    store: dict[str, object],
    **more: object,
) -> Settings:
    values: dict[str, object] = {"MODEL_FAMILIES": [family], **store, **more}
    if family == "moss":
        values |= {"MOSS_CODEC_MODEL": str(moss_codec_dir), "INTERLEAVE_STORE": "memory"}
    return http_settings(codec_dir, fake.url, **values)


async def register(client: httpx.AsyncClient, name: str, audio: bytes) -> httpx.Response:
    data = {"name": name, "reference_text": REFERENCE_TEXT}
    return await client.post(VOICES, data=data, files={"audio_sample": ("a.wav", audio)})


async def registered_names(client: httpx.AsyncClient) -> list[str]:
    voices = (await client.get(VOICES)).json()["voices"]
    return [voice["name"] for voice in voices if voice["type"] == "registered"]


@pytest.mark.parametrize("value", [3.4e38, -1e30, 100.0])
@pytest.mark.parametrize("family", ["neucodec", "moss"])
async def test_a_finite_but_absurd_sample_is_400_and_what_is_stored_is_what_loads(
    monkeypatch: pytest.MonkeyPatch,
    tiny_codec_dir: Path,
    tiny_moss_codec_dir: Path,
    fake_vllm: FakeVLLM,
    reference_wav: bytes,
    store_settings: dict[str, object],  # noqa: F811
    family: str,
    value: float,
) -> None:
    settings = family_settings(
        family, tiny_codec_dir, tiny_moss_codec_dir, fake_vllm, store_settings, MAX_REGISTERED_VOICES=1
    )
    absurd = float_wav(value)
    async with (
        served(family, settings, monkeypatch) as app,
        httpx.AsyncClient(base_url=app.url, timeout=30) as client,
    ):  # type: ignore[attr-defined]
        registered = await register(client, "abc", absurd)
        fields = {
            "reference_text": REFERENCE_TEXT,
            "generate_text": "Say this.",
            "model": family_model(family),
        }
        vc = await client.post(VC, data=fields, files={"reference_audio": ("a.wav", absurd)})
        assert assert_openai_error(registered, 400, "audio_sample")["code"] == "invalid_audio"
        assert assert_openai_error(vc, 400, "reference_audio")["code"] == "invalid_audio"
        assert await registered_names(client) == []
        kept = await register(client, "abc", reference_wav)  # the name is free and the limit not spent
        assert kept.status_code == 201, kept.text
    async with (
        served(family, settings, monkeypatch) as app,
        httpx.AsyncClient(base_url=app.url, timeout=30) as client,
    ):  # type: ignore[attr-defined]
        assert await registered_names(client) == ["abc"], "a fresh server loads exactly what was stored"


def family_model(family: str) -> str:
    return MOSS if family == "moss" else "tts-1"


async def test_codes_an_encoder_gets_wrong_are_refused_and_never_cached_or_shared(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, reference_wav: bytes, tmp_path: Path
) -> None:
    """The encoder's codes are checked before anything keeps them: out of range is a 400 naming the
    field, and neither the in-process cache nor the shared store (nor the voice store) holds them; a
    shared entry out of range (written by anything else) is a miss, encoded again."""
    settings = http_settings(tiny_codec_dir, fake_vllm.url, VOICES_DIR=str(tmp_path / "voices"))
    shared = tmp_path / "voices" / ".references" / "neucodec"
    app = create_app(settings)
    options = server_options(settings) | {"host": "127.0.0.1", "port": 0, "log_level": "warning"}
    fields = {"reference_text": REFERENCE_TEXT, "generate_text": "Say this."}
    async with serve_app(app, **options) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        family = app.state.engine.default
        real_encode = family.codec.encode

        async def wrong(samples: np.ndarray) -> list[int]:
            return [70_000, -1] * 70

        family.codec.encode = wrong
        vc = await client.post(VC, data=fields, files={"reference_audio": ("a.wav", reference_wav)})
        registered = await register(client, "abc", reference_wav)
        assert assert_openai_error(vc, 400, "reference_audio")["code"] == "invalid_audio"
        assert assert_openai_error(registered, 400, "audio_sample")["code"] == "invalid_audio"
        assert len(family.references) == 0 and not list(shared.glob("*.codes"))
        assert await registered_names(client) == []

        family.codec.encode = real_encode
        digest = load_reference(reference_wav, min_s=1, max_s=30, param="x").digest
        shared.mkdir(parents=True, exist_ok=True)
        (shared / f"{digest}.codes").write_text(json.dumps([70_000, 3]))  # a poisoned shared entry
        vc = await client.post(VC, data=fields, files={"reference_audio": ("a.wav", reference_wav)})
        assert vc.status_code == 200, vc.text
        stored = json.loads((shared / f"{digest}.codes").read_text())
        assert len(stored) > 100 and all(0 <= code < 65536 for code in stored), "encoded again and replaced"


def shared_entries(prefix: str) -> int:
    """Encoded references Redis holds under ``prefix`` (a key each, or a field each of a hash)."""
    client = redis.Redis.from_url(REDIS_URL)
    try:
        count = 0
        for key in client.scan_iter(match=prefix + "*"):
            kind = client.type(key)
            count += client.hlen(key) if kind == b"hash" else int(kind == b"string")
        return count
    finally:
        client.close()


async def test_the_shared_reference_cache_in_redis_keeps_at_most_reference_cache_size(
    tiny_codec_dir: Path,
    fake_vllm: FakeVLLM,
    reference_wav: bytes,
    redis_prefix: str,  # noqa: F811
) -> None:
    """Each distinct clip used for voice conversion is one shared entry; REFERENCE_CACHE_SIZE bounds them in
    Redis as it does in files (least recently used out first), so a stream of distinct clips cannot push
    voices and turns out of a Redis with an eviction policy."""
    settings = http_settings(
        tiny_codec_dir,
        fake_vllm.url,
        VOICE_STORE="redis",
        REDIS_URL=REDIS_URL,
        REDIS_KEY_PREFIX=redis_prefix,
        REFERENCE_CACHE_SIZE=2,
    )
    samples, rate = sf.read(io.BytesIO(reference_wav), dtype="float32")
    clips = []
    for gain in (1.0, 0.9, 0.8, 0.7, 0.6):  # five distinct clips (five digests)
        out = io.BytesIO()
        sf.write(out, samples * gain, rate, format="WAV", subtype="FLOAT")
        clips.append(out.getvalue())
    fields = {"reference_text": REFERENCE_TEXT, "generate_text": "Say this."}
    prefix = f"{redis_prefix}references:neucodec:"
    async with _neucodec(settings) as app, httpx.AsyncClient(base_url=app.url, timeout=30) as client:  # type: ignore[attr-defined]
        for index in (0, 1, 0, 2, 3, 4, 3):  # clip 0 used again before the others come
            vc = await client.post(VC, data=fields, files={"reference_audio": ("a.wav", clips[index])})
            assert vc.status_code == 200, vc.text
            assert shared_entries(prefix) <= 2
    assert shared_entries(prefix) == 2
    newest = RedisSharedCodes(REDIS_URL, prefix, 60, capacity=2)
    await newest.start()
    try:
        kept = [await newest.get(load_reference(clip, min_s=1, max_s=30, param="x").digest) for clip in clips]
    finally:
        await newest.close()
    assert [codes is not None for codes in kept] == [False, False, False, True, True]
