"""``POST /v1/audio/normalize``: the text front end on its own (what the speech endpoints speak)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.api.schemas import NormalizeRequest, NormalizeResponse
from app.api.serving import check_input_length, normalize_text
from app.engine import Engine

router = APIRouter(tags=["text"])


@router.post("/v1/audio/normalize")
async def normalize(body: NormalizeRequest, request: Request) -> NormalizeResponse:
    """Normalize ``input`` with ``mode``: 400 when llm mode is not configured, 502 when its call fails."""
    engine: Engine = request.app.state.engine
    check_input_length(body.input, engine.settings.MAX_INPUT_CHARS)
    result = await normalize_text(engine, body.input, body, for_speech=False)
    return NormalizeResponse(output=result.output, mode=result.mode_used)
