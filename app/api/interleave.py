"""``GET`` / ``DELETE /v1/audio/interleave/{interleave_id}``: inspect or forget one id's turn history.

Both answer 400 when ``INTERLEAVE_STORE=off`` and 503 when the store cannot be reached. GET of an id
with no turns (never used, expired or deleted) is a 200 with an empty list: ids are never created
explicitly. DELETE is always a 200 whose ``deleted`` says whether there was anything to forget, so it
is idempotent. The id may hold any character, ``/`` included (percent-encode it in the URL).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel

from app.api.auth import tenant
from app.core import routes
from app.core.errors import InvalidRequest, Unavailable
from app.interleave.ids import MAX_ID_CHARS, scoped
from app.interleave.service import Interleave
from app.interleave.stores.base import StoreError
from app.synthesis.engine import Engine

router = APIRouter(tags=["interleave"])

InterleaveId = Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS, description="The interleave id.")]


class TurnInfo(BaseModel):
    """One retained turn."""

    voice: str
    text: str
    tokens: int
    seconds: float


class InterleaveInfo(BaseModel):
    """The retained turns of an id (oldest first), the caps that apply to its prompts, and its TTL."""

    interleave_id: str
    store: str
    turns: list[TurnInfo]
    total_tokens: int
    expires_in_s: float | None
    ttl_s: float
    max_retain_interleave: int
    max_s: float
    max_model_len: int
    min_gen_tokens: int


class DeleteResult(BaseModel):
    """Whether the id had turns to forget."""

    interleave_id: str
    deleted: bool


def _interleave(request: Request) -> Interleave:
    engine: Engine = request.app.state.engine
    if not engine.interleave.enabled:
        raise InvalidRequest(
            "Interleaved generation is disabled on this server (INTERLEAVE_STORE=off).",
            code="interleave_disabled",
        )
    return engine.interleave


@router.get(routes.INTERLEAVE)
async def get_interleave(interleave_id: InterleaveId, request: Request) -> InterleaveInfo:
    """The id's retained turns with their text and token counts, the caps and the TTL."""
    interleave = _interleave(request)
    assert interleave.store is not None
    try:
        history = await interleave.inspect(scoped(interleave_id, tenant(request)))
    except StoreError as exc:
        raise Unavailable(f"The interleave store is unavailable: {exc}") from exc
    s = interleave.settings
    window = request.app.state.engine.default.context_window()  # the default model's
    turns = [
        TurnInfo(
            voice=turn.voice,
            text=turn.text,
            tokens=len(turn.codes),
            seconds=round(turn.seconds, 2),
        )
        for turn in history.turns
    ]
    return InterleaveInfo(
        interleave_id=interleave_id,
        store=interleave.store.name,
        turns=turns,
        total_tokens=sum(turn.tokens for turn in turns),
        expires_in_s=None if history.expires_in_s is None else round(history.expires_in_s, 1),
        ttl_s=s.INTERLEAVE_TTL_S,
        max_retain_interleave=s.MAX_RETAIN_INTERLEAVE,
        max_s=s.INTERLEAVE_MAX_S,
        max_model_len=window.positions,
        min_gen_tokens=window.min_generation,
    )


@router.delete(routes.INTERLEAVE)
async def delete_interleave(interleave_id: InterleaveId, request: Request) -> DeleteResult:
    """Forget the id now (instead of after INTERLEAVE_TTL_S)."""
    interleave = _interleave(request)
    try:
        deleted = await interleave.forget(scoped(interleave_id, tenant(request)))
    except StoreError as exc:
        raise Unavailable(f"The interleave store is unavailable: {exc}") from exc
    return DeleteResult(interleave_id=interleave_id, deleted=deleted)
