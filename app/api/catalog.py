"""What this server offers: models (`/v1/models`) and the built-in voices (`/v1/audio/speaker`).

The full voice list, registered voices included, is `GET /v1/audio/voices` (app/api/voices.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter, Request

from app.core import routes
from app.core.errors import APIError
from app.core.family import ModelFamily
from app.synthesis.engine import Engine

router = APIRouter(tags=["catalog"])


def _engine(request: Request) -> Engine:
    return request.app.state.engine


def takes_reference(family: ModelFamily) -> bool:
    """Whether ``family`` takes reference audio now (``/v1/audio/vc``, voice registration): it has the
    capability and this server enabled it."""
    if not family.capabilities.reference_voice:
        return False
    try:
        family.check_can_encode()
    except APIError:
        return False
    return True


def model_card(family: ModelFamily) -> dict[str, Any]:
    """What a client needs to offer a model's options: its family (voices name the families that accept
    them), default voice, capabilities and the sampling defaults it applies (unset ones omitted)."""
    defaults = {key: value for key, value in dataclasses.asdict(family.defaults).items() if value is not None}
    return {
        "family": family.name,
        "default_voice": family.voices.default,
        "capabilities": {
            "reference_voice": takes_reference(family),
            "reference_transcript": family.reference.needs_transcript,
            "multi_turn": family.capabilities.multi_turn,
        },
        "defaults": defaults,
    }


@router.get(routes.MODELS)
async def list_models(request: Request) -> dict[str, Any]:
    """OpenAI list shape: the models of every loaded family, then the OpenAI TTS names (the default
    family answers to them). Besides OpenAI's fields each model has its ``family``, ``default_voice``,
    ``capabilities`` (``reference_voice``: voice conversion and registration work now;
    ``reference_transcript``: a reference clip needs its transcript; ``multi_turn``) and ``defaults``
    (the sampling a request gets for each field it leaves unset)."""
    engine = _engine(request)
    created = request.app.state.started_at
    data = []
    for name in engine.model_ids():
        card = {"id": name, "object": "model", "created": created, "owned_by": "tts-server"}
        data.append(card | model_card(engine.family_for(name)))
    return {"object": "list", "data": data}


@router.get(routes.SPEAKERS)
async def list_speakers(request: Request) -> list[str]:
    """The default family's built-in voices as a plain JSON list (the seed's endpoint)."""
    return list(_engine(request).default.voices.voices)
