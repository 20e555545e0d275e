"""API keys: with ``API_KEYS`` set, every ``/v1`` route needs ``Authorization: Bearer <key>``.

``API_KEYS`` is a comma-separated list, or the path of a file with one key a line (blank lines and
``#`` comments skipped); a value naming an existing file is read as one. Unset, any key (or none) is
accepted: OpenAI SDK clients send dummy keys. Probes, metrics and docs stay open. Keys are compared in
constant time against every configured key, and are never logged.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from pathlib import Path

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core import routes
from app.core.errors import Unauthorized

log = logging.getLogger(__name__)


def parse_keys(spec: str) -> tuple[str, list[str]]:
    """``(source, keys)`` of an ``API_KEYS`` value: a file of keys, or a comma-separated list."""
    path = Path(spec)
    if path.is_file():
        lines = (line.strip() for line in path.read_text().splitlines())
        return f"file {path}", [line for line in lines if line and not line.startswith("#")]
    return "list", [key.strip() for key in spec.split(",") if key.strip()]


class ApiKeys:
    """The accepted keys; ``load`` (in the lifespan) reads them. Until then a protected app refuses all."""

    def __init__(self, spec: str) -> None:
        self.enabled = bool(spec.strip())
        self._spec = spec
        self._keys: tuple[bytes, ...] = ()

    async def load(self) -> None:
        """Read the keys; ValueError when API_KEYS is set but names no key (auth would be off)."""
        if not self.enabled:
            log.info("API keys off: any Authorization header is accepted (API_KEYS is empty)")
            return
        source, keys = await asyncio.to_thread(parse_keys, self._spec)
        if not keys:
            raise ValueError(f"API_KEYS is set but its {source} holds no key")
        self._keys = tuple(key.encode() for key in keys)
        log.info("API keys on: %d key(s) from %s", len(keys), source)

    def accepts(self, authorization: bytes) -> bool:
        """True for ``Bearer <a configured key>`` (always, when keys are off)."""
        if not self.enabled:
            return True
        scheme, _, token = authorization.partition(b" ")
        token = token.strip()
        matched = False
        for key in self._keys:  # no early exit: the time does not depend on which key matched
            matched |= hmac.compare_digest(token, key)
        return scheme.lower() == b"bearer" and bool(token) and matched


def tenant_of(authorization: bytes) -> str:
    """The tenant of an accepted ``Bearer <key>``: the first 16 hex digits of the key's SHA-256."""
    token = authorization.partition(b" ")[2].strip()
    return hashlib.sha256(token).hexdigest()[:16]


def tenant(request: Request) -> str | None:
    """The request's tenant (None when API keys are off: one shared namespace)."""
    return getattr(request.state, "tenant", None)


class AuthMiddleware:
    """401 with the OpenAI error body for a ``/v1`` request without a valid key."""

    def __init__(self, app: ASGIApp, keys: ApiKeys) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        protected = (
            scope["type"] == "http" and self.keys.enabled and scope["path"].startswith(routes.API_PREFIX)
        )
        if protected and not self.keys.accepts(dict(scope["headers"]).get(b"authorization", b"")):
            error = Unauthorized(
                "Incorrect or missing API key: send 'Authorization: Bearer <key>'.",
                headers={"WWW-Authenticate": "Bearer"},
            )
            response = JSONResponse(error.body(), status_code=error.status, headers=error.headers)
            await response(scope, receive, send)
            return
        if protected:  # the key's tenant: a name for it that never reveals it (request.state.tenant)
            scope.setdefault("state", {})["tenant"] = tenant_of(dict(scope["headers"])[b"authorization"])
        await self.app(scope, receive, send)
