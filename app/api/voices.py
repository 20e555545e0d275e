"""Voices: list built-in and registered ones, register a voice from a clip, delete a registered one.

``POST /v1/audio/voices`` (multipart ``audio_sample``, ``name``, ``reference_text``, optional
``consent``) encodes the clip once and stores its codes with the normalized transcript; the name then
works as ``voice`` in ``/v1/audio/speech``.

With API keys, a voice records the key that registered it (as the key's tenant, a fingerprint): every
key may list and use it, but only that key or an admin key (``ADMIN_API_KEYS``) may delete it; another
key gets 403. The answer is 403 and not 404 because the voice is no secret from that key: the list
shows it and speech accepts it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Form, Request, UploadFile

from app.api.auth import is_admin, tenant
from app.api.forms import Utf8FormRoute
from app.api.schemas import VoiceUploadForm
from app.core import routes
from app.core.constants import TOKENS_PER_SECOND
from app.synthesis.engine import Engine
from app.synthesis.registry import RegisteredVoice
from app.synthesis.service import SpeechService

router = APIRouter(tags=["voices"], route_class=Utf8FormRoute)


def _registered(voice: RegisteredVoice) -> dict[str, Any]:
    return {
        "id": voice.name,
        "name": voice.name,
        "type": "registered",
        "aliases": [],
        "reference_text": voice.reference_text,
        "duration_s": round(
            voice.duration_s if voice.duration_s is not None else voice.n_codes / TOKENS_PER_SECOND, 2
        ),
        "created_at": voice.created_at,
        "families": list(voice.codes),
        "lexicons": list(voice.lexicons),
    }


@router.get(routes.VOICES)
async def list_voices(request: Request) -> dict[str, list[dict[str, Any]]]:
    """``{"voices": [{"id", "name", "type", "aliases", "families", ...}]}``: built-in voices, then
    registered ones; ``families`` names the model families that accept the voice (a model's family is
    in ``/v1/models``)."""
    engine: Engine = request.app.state.engine
    builtin: dict[str, dict[str, Any]] = {}
    for family in engine.families:
        catalog = family.voices
        for v in catalog.voices:
            new = {"id": v, "name": v, "type": "builtin", "aliases": catalog.aliases_of(v), "families": []}
            builtin.setdefault(v, new)["families"].append(family.name)
    return {"voices": list(builtin.values()) + [_registered(v) for v in await engine.registry.voices()]}


@router.post(routes.VOICES, status_code=201)
async def register_voice(
    audio_sample: Annotated[UploadFile, File(description="wav, flac, ogg/opus or mp3; 1-30 s of speech.")],
    form: Annotated[VoiceUploadForm, Form()],
    request: Request,
) -> dict[str, Any]:
    """Register a voice: the clip is encoded once; the voice object is returned."""
    service: SpeechService = request.app.state.speech
    return _registered(await service.register_voice(form, audio_sample, owner=tenant(request)))


_ERROR_BODY = {"application/json": {"schema": {"$ref": "#/components/schemas/OpenAIError"}}}
DELETE_RESPONSES: dict[int | str, dict[str, Any]] = {
    403: {"description": "Another API key registered the voice.", "content": _ERROR_BODY},
    404: {"description": "No registered voice by that name.", "content": _ERROR_BODY},
}


@router.delete(routes.VOICE, responses=DELETE_RESPONSES)
async def delete_voice(name: str, request: Request) -> dict[str, Any]:
    """Forget a registered voice. With API keys, only the key that registered it or an admin key may
    (403 for any other key); 404 when there is none by that name."""
    engine: Engine = request.app.state.engine
    owner = None if is_admin(request) else tenant(request)  # None: any voice (admin key, keys off)
    await engine.registry.remove(name, owner)
    return {"id": name, "object": "voice", "deleted": True}
