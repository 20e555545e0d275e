"""``POST /v1/audio/speech``: validate, build, stream."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api.schemas import SpeechRequest
from app.api.serving import SpeechService

router = APIRouter(tags=["speech"])

AUDIO_RESPONSES = {
    200: {
        "description": "Audio: raw 24 kHz s16le mono (pcm) or WAV, streamed unless stream is false.",
        "content": {"audio/pcm": {}, "audio/wav": {}},
    }
}


@router.post("/v1/audio/speech", response_class=Response, responses=AUDIO_RESPONSES)  # type: ignore[arg-type]
async def create_speech(body: SpeechRequest, request: Request) -> Response:
    """Text to speech, streamed while the LM generates it."""
    service: SpeechService = request.app.state.speech
    return await service.create(body, request)
