"""Registered voices end to end: upload, list, use in /v1/audio/speech (SDK too), restart, delete."""

from __future__ import annotations

import hashlib
import io
import json
import wave
from pathlib import Path

import httpx
import openai
import pytest
import redis

from app.config import Settings
from tests.api.conftest import REFERENCE_TEXT, http_settings, serve
from tests.api.test_speech_http import assert_openai_error
from tests.fakes.fake_vllm import FakeVLLM
from tests.interleave.conftest import REDIS_URL, redis_prefix  # noqa: F401  (a test's own Redis keys)
from tests.speech_audio import transcode

VOICES = "/v1/audio/voices"
N_CODES = 48


def settings_for(codec_dir: Path, fake: FakeVLLM, voices_dir: Path, **overrides: object) -> Settings:
    return http_settings(codec_dir, fake.url, VOICES_DIR=str(voices_dir), **overrides)


async def register(
    client: httpx.AsyncClient, name: str, audio: bytes | None, **fields: str
) -> httpx.Response:
    files = {"audio_sample": ("sample.wav", audio)} if audio is not None else None
    data = {"name": name, "reference_text": REFERENCE_TEXT} | fields
    return await client.post(VOICES, data=data, files=files)


def vc_reference(prompt: str) -> str:
    """The reference turn of a voice-conversion prompt (empty for a TTS prompt)."""
    return prompt.split("<|im_end|>")[0] if "<|im_end|>" in prompt else ""


async def test_register_use_restart_and_delete(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, reference_wav: bytes, tmp_path: Path
) -> None:
    settings = settings_for(tiny_codec_dir, fake_vllm, tmp_path / "voices")
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        created = await register(client, "my_voice-1", reference_wav, consent="speaker agreed on 2026-01-01")
        assert created.status_code == 201, created.text
        voice = created.json()
        assert voice["id"] == voice["name"] == "my_voice-1" and voice["type"] == "registered"
        assert voice["reference_text"] == REFERENCE_TEXT
        assert voice["duration_s"] == pytest.approx(2.79)  # the clip's length
        listed = (await client.get(VOICES)).json()["voices"]
        assert [v["id"] for v in listed] == ["husein", "idayu", "my_voice-1"]
        assert [v["type"] for v in listed] == ["builtin", "builtin", "registered"]
        assert "nova" in listed[1]["aliases"]
        speech = await client.post("/v1/audio/speech", json={"input": "Say this.", "voice": "my_voice-1"})
        assert speech.status_code == 200, speech.text
        first_prompt = fake_vllm.requests[-1].body["prompt"]
        reference = vc_reference(first_prompt)
        assert reference.startswith(f"<|im_start|>{REFERENCE_TEXT}<|speech_start|><|s_")
        assert reference.count("<|s_") == 139
        assert first_prompt == f"{reference}<|im_end|><|im_start|>Say this.<|speech_start|>"
    stored = json.loads((tmp_path / "voices" / "my_voice-1.json").read_text())
    assert stored["consent"] == "speaker agreed on 2026-01-01" and len(stored["codes"]["neucodec"]) == 139

    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        listed = (await client.get(VOICES)).json()["voices"]
        assert "my_voice-1" in [v["id"] for v in listed]
        speech = await client.post(
            "/v1/audio/speech", json={"input": "Say this.", "voice": {"id": "my_voice-1"}, "stream": False}
        )
        assert speech.status_code == 200, speech.text
        assert fake_vllm.requests[-1].body["prompt"] == first_prompt, "the same voice after a restart"
        deleted = await client.delete(f"{VOICES}/my_voice-1")
        assert deleted.status_code == 200 and deleted.json() == {
            "id": "my_voice-1",
            "object": "voice",
            "deleted": True,
        }
        assert "my_voice-1" not in [v["id"] for v in (await client.get(VOICES)).json()["voices"]]
        gone = await client.post("/v1/audio/speech", json={"input": "Say this.", "voice": "my_voice-1"})
        assert assert_openai_error(gone, 400, "voice")["code"] == "voice_not_found"
        assert_openai_error(await client.delete(f"{VOICES}/my_voice-1"), 404, "name")
        assert_openai_error(await client.delete(f"{VOICES}/husein"), 404, "name")
    assert not (tmp_path / "voices" / "my_voice-1.json").exists()


async def test_registered_voice_through_the_openai_sdk(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, reference_wav: bytes, tmp_path: Path
) -> None:
    settings = settings_for(tiny_codec_dir, fake_vllm, tmp_path / "voices")
    async with serve(settings) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            created = await register(client, "anna", transcode(reference_wav, "ogg"))
            assert created.status_code == 201, created.text
        async with openai.AsyncOpenAI(api_key="not-needed", base_url=url + "/v1", max_retries=0) as sdk:
            response = await sdk.audio.speech.create(
                model="tts-1", voice="anna", input="Hello from the SDK.", response_format="wav"
            )
            with wave.open(io.BytesIO(response.content)) as wav:
                assert len(wav.readframes(10**9)) == N_CODES * 480 * 2
            assert vc_reference(fake_vllm.requests[-1].body["prompt"]).count("<|s_") > 100
            async with sdk.audio.speech.with_streaming_response.create(
                model="gpt-4o-mini-tts", voice="anna", input="Streamed.", response_format="pcm"
            ) as streamed:
                audio = b"".join([chunk async for chunk in streamed.iter_bytes()])
            assert len(audio) == N_CODES * 480 * 2
            with pytest.raises(openai.BadRequestError) as info:
                await sdk.audio.speech.create(model="tts-1", voice="bob", input="x")
            assert "anna" in info.value.message, "the error lists registered voices too"


async def test_names_are_validated_before_the_upload_is_encoded(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, reference_wav: bytes, tmp_path: Path
) -> None:
    settings = settings_for(tiny_codec_dir, fake_vllm, tmp_path / "voices", MAX_REGISTERED_VOICES=1)
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        for bad in ("has space", "../escape", "x" * 65, "naïve"):
            error = assert_openai_error(await register(client, bad, reference_wav), 400, "name")
            assert error["code"] == "invalid_voice_name"
        for taken in ("husein", "IDAYU", "alloy"):  # built-in voices and aliases
            assert assert_openai_error(await register(client, taken, reference_wav), 409, "name")["code"] == (
                "voice_exists"
            )
        assert (await register(client, "first", reference_wav)).status_code == 201
        assert_openai_error(await register(client, "First", reference_wav), 409, "name")
        full = assert_openai_error(await register(client, "second", reference_wav), 400, "name")
        assert full["code"] == "voice_limit_reached"
        assert_openai_error(await register(client, "third", None), 422, "audio_sample")
        no_text = await client.post(
            VOICES, data={"name": "x"}, files={"audio_sample": ("a.wav", reference_wav)}
        )
        assert_openai_error(no_text, 422, "reference_text")
    assert sorted(p.name for p in (tmp_path / "voices").glob("*.json")) == ["first.json"]


async def test_bad_samples_are_400(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, reference_wav: bytes, tmp_path: Path
) -> None:
    settings = settings_for(tiny_codec_dir, fake_vllm, tmp_path / "voices", MAX_UPLOAD_BYTES=100_000)
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        not_audio = await register(client, "a", b"hello, I am text" * 100)
        assert assert_openai_error(not_audio, 400, "audio_sample")["code"] == "invalid_audio"
        assert_openai_error(await register(client, "a", reference_wav), 413, "audio_sample")
        assert (await client.get(VOICES)).json()["voices"][-1]["type"] == "builtin"
    assert not (tmp_path / "voices").exists()


async def test_registering_needs_the_encoder_but_registered_voices_do_not(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, reference_wav: bytes, tmp_path: Path
) -> None:
    async with (
        serve(settings_for(tiny_codec_dir, fake_vllm, tmp_path / "voices")) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as client,
    ):
        assert (await register(client, "kept", reference_wav)).status_code == 201
    settings = settings_for(tiny_codec_dir, fake_vllm, tmp_path / "voices", REFERENCE_VOICES=False)
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        refused = assert_openai_error(await register(client, "new", reference_wav), 400)
        assert refused["code"] == "vc_disabled"
        speech = await client.post("/v1/audio/speech", json={"input": "Still works.", "voice": "kept"})
        assert speech.status_code == 200, speech.text
        assert vc_reference(fake_vllm.requests[-1].body["prompt"]).count("<|s_") == 139


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def fingerprint(key: str) -> str:
    """How a voice record names the key that registered it (the key itself is never stored)."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@pytest.fixture(params=["file", "redis"])
def store_settings(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, object]:
    """The voice store of a test that runs against both: files in a directory, or the project's Redis."""
    if request.param == "file":
        return {"VOICE_STORE": "file", "VOICES_DIR": str(tmp_path / "voices")}
    prefix = request.getfixturevalue("redis_prefix")
    return {"VOICE_STORE": "redis", "REDIS_URL": REDIS_URL, "REDIS_KEY_PREFIX": prefix}


def stored_record(store: dict[str, object], name: str) -> str:
    """The raw record of voice ``name`` in ``store``, as text."""
    if store["VOICE_STORE"] == "file":
        return (Path(str(store["VOICES_DIR"])) / f"{name}.json").read_text()
    client = redis.Redis.from_url(REDIS_URL)
    try:
        value = client.hget(f"{store['REDIS_KEY_PREFIX']}voices", name.lower())
    finally:
        client.close()
    assert isinstance(value, bytes)
    return value.decode()


async def test_with_api_keys_a_voice_is_usable_by_every_key_and_deletable_by_its_key_or_an_admin_key(
    tiny_codec_dir: Path,
    fake_vllm: FakeVLLM,
    reference_wav: bytes,
    tmp_path: Path,
    store_settings: dict[str, object],
) -> None:
    """With API_KEYS, only the key that registered a voice (or an admin key) may delete it."""
    keys = {"API_KEYS": "key-a,key-b", "ADMIN_API_KEYS": "key-admin"}
    settings = http_settings(tiny_codec_dir, fake_vllm.url, **store_settings, **keys)
    a, b, admin = bearer("key-a"), bearer("key-b"), bearer("key-admin")
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        for name in ("of_a", "also_of_a"):
            created = await client.post(
                VOICES,
                headers=a,
                data={"name": name, "reference_text": REFERENCE_TEXT},
                files={"audio_sample": ("a.wav", reference_wav)},
            )
            assert created.status_code == 201, created.text
        listed_by_b = [v["id"] for v in (await client.get(VOICES, headers=b)).json()["voices"]]
        speech_b = await client.post("/v1/audio/speech", headers=b, json={"input": "Hi.", "voice": "of_a"})
        refused = await client.delete(f"{VOICES}/of_a", headers=b)
        still_there = [v["id"] for v in (await client.get(VOICES, headers=a)).json()["voices"]]
        by_owner = await client.delete(f"{VOICES}/of_a", headers=a)
        by_admin = await client.delete(f"{VOICES}/also_of_a", headers=admin)
        missing = await client.delete(f"{VOICES}/of_a", headers=b)
        without_key = await client.delete(f"{VOICES}/of_a")
        left = [v["id"] for v in (await client.get(VOICES, headers=admin)).json()["voices"]]
    assert "of_a" in listed_by_b and speech_b.status_code == 200, speech_b.text
    assert assert_openai_error(refused, 403, "name")["code"] == "voice_not_owned"
    assert "of_a" in still_there
    assert by_owner.status_code == 200 and by_owner.json()["deleted"] is True
    assert by_admin.status_code == 200 and by_admin.json()["deleted"] is True
    assert_openai_error(missing, 404, "name")
    assert_openai_error(without_key, 401)
    assert "of_a" not in left and "also_of_a" not in left


async def test_the_record_names_the_key_by_a_fingerprint_never_the_key(
    tiny_codec_dir: Path,
    fake_vllm: FakeVLLM,
    reference_wav: bytes,
    tmp_path: Path,
    store_settings: dict[str, object],
) -> None:
    key = "sk-secret-key-of-a"
    settings = http_settings(tiny_codec_dir, fake_vllm.url, **store_settings, API_KEYS=key)
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        created = await client.post(
            VOICES,
            headers=bearer(key),
            data={"name": "Mine", "reference_text": REFERENCE_TEXT},
            files={"audio_sample": ("a.wav", reference_wav)},
        )
        assert created.status_code == 201, created.text
        assert key not in created.text and fingerprint(key) not in created.text
        listed = (await client.get(VOICES, headers=bearer(key))).text
        assert key not in listed and fingerprint(key) not in listed
    record = stored_record(store_settings, "Mine")
    assert json.loads(record)["owner"] == fingerprint(key)
    assert key not in record


async def test_voices_from_before_api_keys_are_deletable_by_admin_keys_only(
    tiny_codec_dir: Path,
    fake_vllm: FakeVLLM,
    reference_wav: bytes,
    tmp_path: Path,
    store_settings: dict[str, object],
) -> None:
    """A voice registered while keys were off records no key: once keys are on, no ordinary key can
    claim it; an admin key can delete it, and every key can still use it."""
    open_settings = http_settings(tiny_codec_dir, fake_vllm.url, **store_settings)
    async with serve(open_settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        assert (await register(client, "legacy", reference_wav)).status_code == 201
        assert (await register(client, "open", reference_wav)).status_code == 201
        open_delete = await client.delete(f"{VOICES}/open", headers=bearer("anything"))
        assert open_delete.status_code == 200, "without API_KEYS anyone deletes, as before"
    keys = {"API_KEYS": "key-a", "ADMIN_API_KEYS": "key-admin"}
    settings = http_settings(tiny_codec_dir, fake_vllm.url, **store_settings, **keys)
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        speech = await client.post(
            "/v1/audio/speech", headers=bearer("key-a"), json={"input": "Hi.", "voice": "legacy"}
        )
        refused = await client.delete(f"{VOICES}/legacy", headers=bearer("key-a"))
        deleted = await client.delete(f"{VOICES}/legacy", headers=bearer("key-admin"))
    assert speech.status_code == 200, speech.text
    assert assert_openai_error(refused, 403, "name")["code"] == "voice_not_owned"
    assert deleted.status_code == 200
