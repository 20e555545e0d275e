"""``POST /v1/audio/speech``: validate, build, stream."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
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


SPEECH_EXAMPLES: dict[str, Any] = {
    "stream_pcm": {
        "summary": "Stream raw PCM (24 kHz s16le mono)",
        "value": {"model": "tts-1", "input": "Hello! How can I help you today?", "voice": "alloy"},
    },
    "sse_mp3": {
        "summary": "OpenAI SSE events carrying mp3",
        "value": {
            "input": "Your order ships on the 3rd of May.",
            "voice": "husein",
            "response_format": "mp3",
            "stream_format": "sse",
            "mode": "spoken",
        },
    },
    "whole_wav": {
        "summary": "The whole utterance as one WAV file",
        "value": {
            "input": "Selamat pagi, apa khabar?",
            "voice": "idayu",
            "response_format": "wav",
            "stream": False,
        },
    },
}


@router.post("/v1/audio/speech", response_class=Response, responses=AUDIO_RESPONSES)  # type: ignore[arg-type]
async def create_speech(
    body: Annotated[SpeechRequest, Body(openapi_examples=SPEECH_EXAMPLES)], request: Request
) -> Response:
    """Text to speech, streamed while the LM generates it."""
    service: SpeechService = request.app.state.speech
    return await service.create(body, request)
