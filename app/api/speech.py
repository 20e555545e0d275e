"""``POST /v1/audio/speech``: validate, build, stream."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import Response

from app.api.auth import tenant
from app.api.schemas import SpeechRequest
from app.api.streaming import audio_response
from app.core import routes
from app.core.stats import UtteranceStats
from app.interleave.ids import HEADER as INTERLEAVE_HEADER
from app.interleave.ids import interleave_id, scoped
from app.observability.requests import request_record
from app.synthesis.planning import Conversation
from app.synthesis.service import SpeechService

router = APIRouter(tags=["speech"])

AUDIO_RESPONSES: dict[int | str, dict[str, Any]] = {
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


@router.post(routes.SPEECH, response_class=Response, responses=AUDIO_RESPONSES)
async def create_speech(
    body: Annotated[SpeechRequest, Body(openapi_examples=SPEECH_EXAMPLES)], request: Request
) -> Response:
    """Text to speech, streamed while the LM generates it."""
    service: SpeechService = request.app.state.speech
    record = request_record(request)
    record.voice, record.response_format = body.voice_name(), body.response_format
    record.stats = stats = UtteranceStats()
    name = interleave_id(body.interleave_id, request.headers.get(INTERLEAVE_HEADER))
    conversation = None if name is None else Conversation(name, scoped(name, tenant(request)))
    synthesis = await service.speech(body, stats, conversation, request.is_disconnected)
    return await audio_response(synthesis)
