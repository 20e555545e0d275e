"""``POST /v1/audio/normalize``: the text front end on its own (what the speech endpoints speak)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from app.api.schemas import NormalizeRequest, NormalizeResponse
from app.core import routes
from app.synthesis.engine import Engine
from app.synthesis.planning import check_input_length, normalize_text

router = APIRouter(tags=["text"])


NORMALIZE_EXAMPLES: dict[str, Any] = {
    "spoken": {
        "summary": "Numbers, money and dates read out",
        "value": {"input": "Pay RM12.50 by 3/5/2025.", "mode": "spoken"},
    },
    "rule": {"summary": "Markup cleaned up", "value": {"input": "**Hello** <b>world</b>", "mode": "rule"}},
}


@router.post(routes.NORMALIZE)
async def normalize(
    body: Annotated[NormalizeRequest, Body(openapi_examples=NORMALIZE_EXAMPLES)], request: Request
) -> NormalizeResponse:
    """Normalize ``input`` with ``mode``: 400 when llm mode is not configured, 502 when its call fails."""
    engine: Engine = request.app.state.engine
    check_input_length(body.input, engine.settings.MAX_INPUT_CHARS)
    result = await normalize_text(engine, body.input, body, for_speech=False)
    return NormalizeResponse(output=result.output, mode=result.mode_used)
