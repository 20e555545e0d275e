"""Registered voices end to end: upload, list, use in /v1/audio/speech (SDK too), restart, delete."""

from __future__ import annotations

import io
import json
import wave
from pathlib import Path

import httpx
import openai
import pytest

from app.config import Settings
from tests.api.conftest import REFERENCE_TEXT, http_settings, serve
from tests.api.test_speech_http import assert_openai_error
from tests.fakes.fake_vllm import FakeVLLM
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
    settings = settings_for(tiny_codec_dir, fake_vllm, tmp_path / "voices", VC_ENABLED=False)
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        refused = assert_openai_error(await register(client, "new", reference_wav), 400)
        assert refused["code"] == "vc_disabled"
        speech = await client.post("/v1/audio/speech", json={"input": "Still works.", "voice": "kept"})
        assert speech.status_code == 200, speech.text
        assert vc_reference(fake_vllm.requests[-1].body["prompt"]).count("<|s_") == 139
