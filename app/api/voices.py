"""Voices: list built-in and registered ones, register a voice from a clip, delete a registered one.

``POST /v1/audio/voices`` (multipart ``audio_sample``, ``name``, ``reference_text``, optional
``consent``) encodes the clip once and stores its codes with the normalized transcript; the name then
works as ``voice`` in ``/v1/audio/speech``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Request, UploadFile

from app.api.schemas import TextOptions, VoiceUploadForm
from app.api.serving import SpeechService
from app.api.uploads import read_reference
from app.audio.constants import TOKENS_PER_SECOND
from app.engine import Engine
from app.registry import RegisteredVoice

router = APIRouter(tags=["voices"])


def _registered(voice: RegisteredVoice) -> dict[str, Any]:
    return {
        "id": voice.name,
        "name": voice.name,
        "type": "registered",
        "aliases": [],
        "reference_text": voice.reference_text,
        "duration_s": round(len(voice.codes) / TOKENS_PER_SECOND, 2),
        "created_at": voice.created_at,
    }


@router.get("/v1/audio/voices")
async def list_voices(request: Request) -> dict[str, list[dict[str, Any]]]:
    """``{"voices": [{"id", "name", "type", "aliases", ...}]}``: built-in voices, then registered ones."""
    engine: Engine = request.app.state.engine
    catalog = engine.voices
    builtin = [
        {"id": v, "name": v, "type": "builtin", "aliases": catalog.aliases_of(v)} for v in catalog.voices
    ]
    return {"voices": builtin + [_registered(v) for v in engine.registry.voices]}


@router.post("/v1/audio/voices", status_code=201)
async def register_voice(
    audio_sample: Annotated[UploadFile, File(description="wav, flac, ogg/opus or mp3; 1-30 s of speech.")],
    form: Annotated[VoiceUploadForm, Form()],
    request: Request,
) -> dict[str, Any]:
    """Register a voice: the clip is encoded once; the voice object is returned."""
    service: SpeechService = request.app.state.speech
    engine = service.engine
    engine.registry.check_name(form.name)  # fail fast, before the upload is decoded
    engine.check_can_encode()
    reference = await read_reference(engine.settings, service.decoder, audio_sample, "audio_sample")
    options = TextOptions(language=form.language)
    text = await service.speech_text(form.reference_text, options, "reference_text")
    codes = await engine.reference_codes(reference)
    voice = await engine.registry.add(form.name, text, codes, form.consent)
    return _registered(voice)


@router.delete("/v1/audio/voices/{name}")
async def delete_voice(name: str, request: Request) -> dict[str, Any]:
    """Forget a registered voice (404 when there is none by that name)."""
    engine: Engine = request.app.state.engine
    await engine.registry.remove(name)
    return {"id": name, "object": "voice", "deleted": True}
