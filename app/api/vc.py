"""``POST /v1/audio/vc`` (multipart): speak ``generate_text`` in the voice of ``reference_audio``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import Response

from app.api.schemas import VCForm
from app.api.serving import SpeechService
from app.api.speech import AUDIO_RESPONSES

router = APIRouter(tags=["speech"])


@router.post("/v1/audio/vc", response_class=Response, responses=AUDIO_RESPONSES)  # type: ignore[arg-type]
async def create_vc(
    reference_audio: Annotated[UploadFile, File(description="wav, flac, ogg/opus or mp3; 1-30 s of speech.")],
    form: Annotated[VCForm, Form()],
    request: Request,
) -> Response:
    """Voice conversion: the reference clip and its transcript set the voice, streamed like speech."""
    service: SpeechService = request.app.state.speech
    return await service.convert(form, reference_audio, request)
