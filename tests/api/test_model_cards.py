"""What ``/v1/models`` and ``/v1/audio/voices`` tell a client about each model: its family, default
voice, capabilities as this server enabled them, sampling defaults, and which families take a voice
(what the Gradio app's model picker follows)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.main import create_app
from app.synthesis.engine import Engine
from tests.api.conftest import serve_app
from tests.fakes.fake_vllm import FakeVLLM
from tests.fakes.tone.family import MODEL
from tests.fakes.tone.serving import tone_engine, tone_settings


async def catalog(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, **overrides: object
) -> AsyncIterator[tuple[dict[str, Any], list[dict[str, Any]], Engine]]:
    """The models by id and the voices of a server with NeuCodec (default) and the tone family, with a
    registered voice that has NeuCodec codes only."""
    settings = tone_settings(tiny_codec_dir, fake_vllm.url, **overrides)
    engine, _ = tone_engine(settings)
    async with serve_app(create_app(settings, engine=engine)) as url:
        await engine.registry.add("mine", "hello", {"neucodec": [1, 2, 3]}, None, 0, None)
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            models = (await client.get("/v1/models")).json()["data"]
            voices = (await client.get("/v1/audio/voices")).json()["voices"]
        yield {m["id"]: m for m in models}, voices, engine


@pytest.fixture
async def served(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM
) -> AsyncIterator[tuple[dict[str, Any], list[dict[str, Any]], Engine]]:
    async for served in catalog(tiny_codec_dir, fake_vllm):
        yield served


async def test_each_model_names_its_family_voice_capabilities_and_defaults(
    served: tuple[dict[str, Any], list[dict[str, Any]], Engine],
) -> None:
    models, _, engine = served
    neucodec = engine.default
    assert list(models) == ["TTS-model", MODEL, "tts-1", "tts-1-hd", "gpt-4o-mini-tts"]
    card = models["TTS-model"]
    assert card["object"] == "model" and card["owned_by"] == "tts-server"
    assert card["family"] == "neucodec" and card["default_voice"] == neucodec.voices.default
    assert card["capabilities"] == {"reference_voice": True, "reference_transcript": True, "multi_turn": True}
    assert card["defaults"] == {
        "max_tokens": neucodec.defaults.max_tokens,
        "temperature": neucodec.defaults.temperature,
        "repetition_penalty": neucodec.defaults.repetition_penalty,
    }  # top_p, top_k and seed are left to the backend: not listed
    for openai_name in ("tts-1", "tts-1-hd", "gpt-4o-mini-tts"):  # the default family answers to them
        assert {k: v for k, v in models[openai_name].items() if k != "id"} == {
            k: v for k, v in card.items() if k != "id"
        }
    tone = models[MODEL]
    assert tone["family"] == "tone" and tone["default_voice"] == "low"
    assert tone["capabilities"] == {
        "reference_voice": False,
        "reference_transcript": True,
        "multi_turn": False,
    }
    assert tone["defaults"] == {"max_tokens": 100, "temperature": 1.0, "repetition_penalty": 1.0}


async def test_voices_name_the_families_that_take_them(
    served: tuple[dict[str, Any], list[dict[str, Any]], Engine],
) -> None:
    _, voices, _ = served
    families = {voice["id"]: voice["families"] for voice in voices}
    assert families == {"husein": ["neucodec"], "idayu": ["neucodec"], "low": ["tone"], "high": ["tone"]} | {
        "mine": ["neucodec"]  # registered with NeuCodec's codes only
    }


async def test_reference_voice_follows_what_the_server_enabled(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM
) -> None:
    async for models, _, _ in catalog(tiny_codec_dir, fake_vllm, VC_ENABLED=False):
        assert models["TTS-model"]["capabilities"]["reference_voice"] is False
