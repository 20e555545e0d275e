"""Pronunciation lexicons: register one (JSON entries or a W3C PLS document), list, read, delete.

A registered lexicon is named per request (``lexicons`` in ``/v1/audio/speech``, ``/v1/audio/vc``,
``/v1/audio/normalize``; OpenAI clients send it through ``extra_body``) or attached to a registered
voice (``lexicons`` when it is registered). With API keys, a lexicon records the key that registered
it: every key may list and use it, only that key or an admin key may delete it (403 for another).
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request

from app.api.auth import is_admin, tenant
from app.api.schemas import LexiconCreate
from app.api.voices import DELETE_RESPONSES
from app.core import routes
from app.core.errors import InvalidRequest
from app.synthesis.engine import Engine
from app.synthesis.lexicons import RegisteredLexicon
from app.text.lexicon import Lexicon, LexiconError, parse_entries, parse_pls

router = APIRouter(tags=["lexicons"])


def _summary(record: RegisteredLexicon) -> dict[str, Any]:
    return {
        "id": record.name,
        "object": "lexicon",
        "name": record.name,
        "entries": len(record.lexicon.entries),
        "created_at": record.created_at,
    }


def _lexicon(body: LexiconCreate, engine: Engine) -> Lexicon:
    """The entries of ``body`` (exactly one of ``entries`` and ``pls``), checked against the limits."""
    if (body.entries is None) == (body.pls is None):
        raise InvalidRequest("give exactly one of entries and pls", param="entries", code="invalid_lexicon")
    limits = engine.lexicons.limits
    try:
        if body.pls is not None:
            return parse_pls(body.pls, body.case_sensitive, limits)
        items = [entry.model_dump(exclude_none=True) for entry in body.entries or ()]
        return parse_entries(items, body.language, body.case_sensitive, limits)
    except LexiconError as exc:
        field = "pls" if body.pls is not None else "entries"
        raise InvalidRequest(str(exc), param=field, code="invalid_lexicon") from None


@router.post(routes.LEXICONS, status_code=201)
async def create_lexicon(body: LexiconCreate, request: Request) -> dict[str, Any]:
    """Register a lexicon; the lexicon object is returned (its entry count)."""
    engine: Engine = request.app.state.engine
    record = await engine.lexicons.add(body.name, _lexicon(body, engine), int(time.time()), tenant(request))
    return _summary(record)


@router.get(routes.LEXICONS)
async def list_lexicons(request: Request) -> dict[str, list[dict[str, Any]]]:
    """``{"lexicons": [{"id", "object", "name", "entries", "created_at"}]}`` in name order."""
    engine: Engine = request.app.state.engine
    return {"lexicons": [_summary(record) for record in await engine.lexicons.lexicons()]}


@router.get(routes.LEXICON, responses={404: DELETE_RESPONSES[404]})
async def get_lexicon(name: str, request: Request) -> dict[str, Any]:
    """One lexicon with its entries (``grapheme``, ``alias``, ``case_sensitive``, ``language``)."""
    engine: Engine = request.app.state.engine
    record = await engine.lexicons.get(name)
    return {**_summary(record), "entries": [entry.to_json() for entry in record.lexicon.entries]}


@router.delete(routes.LEXICON, responses=DELETE_RESPONSES)
async def delete_lexicon(name: str, request: Request) -> dict[str, Any]:
    """Forget a lexicon. With API keys, only the key that registered it or an admin key may (403 for any
    other key); 404 when there is none by that name."""
    engine: Engine = request.app.state.engine
    owner = None if is_admin(request) else tenant(request)
    await engine.lexicons.remove(name, owner)
    return {"id": name, "object": "lexicon", "deleted": True}
