"""``POST /v1/audio/normalize``: the text front end on its own (what the speech endpoints speak)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from app.api.schemas import NormalizeRequest, NormalizeResponse, SpokenSegment
from app.core import routes
from app.synthesis.engine import Engine
from app.synthesis.spoken import spoken_plan
from app.text.speech_plan import Speak

router = APIRouter(tags=["text"])


NORMALIZE_EXAMPLES: dict[str, Any] = {
    "spoken": {
        "summary": "Numbers, money and dates read out",
        "value": {"input": "Pay RM12.50 by 3/5/2025.", "mode": "spoken"},
    },
    "rule": {"summary": "Markup cleaned up", "value": {"input": "**Hello** <b>world</b>", "mode": "rule"}},
    "ssml": {
        "summary": "SSML: a break and digits",
        "value": {
            "input": '<speak>Your code is <break time="500ms"/>'
            '<say-as interpret-as="digits">4821</say-as>.</speak>',
            "mode": "spoken",
        },
    },
}


@router.post(routes.NORMALIZE, response_model_exclude_none=True)
async def normalize(
    body: Annotated[NormalizeRequest, Body(openapi_examples=NORMALIZE_EXAMPLES)], request: Request
) -> NormalizeResponse:
    """Normalize ``input`` (text or SSML, with ``lexicons``) with ``mode``: what the speech endpoints
    will speak. 400 when llm mode is not configured, 502 when its call fails."""
    engine: Engine = request.app.state.engine
    planned = await spoken_plan(engine, body.input, body, "input", body.lexicons or (), for_speech=False)
    plan = planned.plan
    if not plan.ssml:
        return NormalizeResponse(output=plan.text, mode=planned.mode_used)
    segments = [
        SpokenSegment(type="speech", text=item.text, rate=item.rate)
        if isinstance(item, Speak)
        else SpokenSegment(type="break", ms=item.ms)
        for item in plan.items
    ]
    return NormalizeResponse(
        output=plan.marked(), mode=planned.mode_used, segments=segments, ignored=list(plan.ignored)
    )
