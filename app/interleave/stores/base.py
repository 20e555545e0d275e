"""The turn store contract that every store implements (the factory is ``stores.factory``).

Every store keys an id by ``ids.digest(id)``, keeps the turns ``turns.retain`` selects after each
append, forgets an id ``ttl_s`` seconds after its last append, and reads what it cannot parse as an
empty history. Backend failures raise ``StoreError``; the caller decides whether a request goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from app.interleave.turns import Turn


class StoreError(Exception):
    """The store's backend failed (I/O error, Redis unreachable)."""


@dataclass(frozen=True)
class History:
    """The turns of one id, oldest first, and the seconds until it expires (None when empty)."""

    turns: list[Turn] = field(default_factory=list)
    expires_in_s: float | None = None


class TurnStore(Protocol):
    """Turn history per interleave id."""

    name: str

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def load(self, interleave_id: str) -> History: ...

    async def append(self, interleave_id: str, turn: Turn, keep: int) -> None:
        """Add ``turn`` after the id's turns, keep ``retain(turns, keep, max_codes)``, renew the TTL."""
        ...

    async def delete(self, interleave_id: str) -> bool:
        """Forget the id now; True when it had (unexpired) turns."""
        ...
