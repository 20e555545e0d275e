"""What this server offers: models (`/v1/models`) and the built-in voices (`/v1/audio/speaker`).

The full voice list, registered voices included, is `GET /v1/audio/voices` (app/api/voices.py).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from app.api.serving import MODEL_ALIASES
from app.engine import Engine

router = APIRouter(tags=["catalog"])


def _engine(request: Request) -> Engine:
    return request.app.state.engine


@router.get("/v1/models")
async def list_models(request: Request) -> dict[str, Any]:
    """OpenAI list shape: our served model and the OpenAI TTS names it answers to."""
    engine = _engine(request)
    names = [engine.settings.MODEL_NAME, *MODEL_ALIASES]
    created = request.app.state.started_at
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "tts-server"} for name in names
        ],
    }


@router.get("/v1/audio/speaker")
async def list_speakers(request: Request) -> list[str]:
    """The configured voices as a plain JSON list (the seed's endpoint)."""
    return list(_engine(request).voices.voices)
