"""``POST /v1/audio/vc`` (multipart): speak ``generate_text`` in the voice of ``reference_audio``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import Response

from app.api.forms import Utf8FormRoute
from app.api.schemas import VCForm
from app.api.speech import AUDIO_RESPONSES
from app.api.streaming import audio_response
from app.core import routes
from app.core.stats import UtteranceStats
from app.observability.requests import request_record
from app.synthesis.service import SpeechService

router = APIRouter(tags=["speech"], route_class=Utf8FormRoute)


@router.post(routes.VC, response_class=Response, responses=AUDIO_RESPONSES)
async def create_vc(
    reference_audio: Annotated[UploadFile, File(description="wav, flac, ogg/opus or mp3; 1-30 s of speech.")],
    form: Annotated[VCForm, Form()],
    request: Request,
) -> Response:
    """Voice conversion: the reference clip and its transcript set the voice, streamed like speech."""
    service: SpeechService = request.app.state.speech
    record = request_record(request)
    record.voice, record.response_format = "reference_audio", form.response_format
    record.stats = stats = UtteranceStats()
    synthesis = await service.convert(form, reference_audio, stats, request.is_disconnected)
    return await audio_response(synthesis)
