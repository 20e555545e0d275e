"""What this server offers: models (`/v1/models`) and the built-in voices (`/v1/audio/speaker`).

The full voice list, registered voices included, is `GET /v1/audio/voices` (app/api/voices.py).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from app.core import routes
from app.synthesis.engine import Engine

router = APIRouter(tags=["catalog"])


def _engine(request: Request) -> Engine:
    return request.app.state.engine


@router.get(routes.MODELS)
async def list_models(request: Request) -> dict[str, Any]:
    """OpenAI list shape: the models of every loaded family, then the OpenAI TTS names (the default
    family answers to them)."""
    names = _engine(request).model_ids()
    created = request.app.state.started_at
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "tts-server"} for name in names
        ],
    }


@router.get(routes.SPEAKERS)
async def list_speakers(request: Request) -> list[str]:
    """The default family's built-in voices as a plain JSON list (the seed's endpoint)."""
    return list(_engine(request).default.voices.voices)
