"""API keys: with ``API_KEYS`` set, every ``/v1`` route needs ``Authorization: Bearer <key>``.

The Cartesia-compatible routes (``/tts/...``) and every WebSocket need a key too, and also take it the
way Cartesia's clients send it: an ``X-API-Key`` header, or an ``api_key`` query parameter (browsers
cannot set WebSocket headers). A WebSocket without a valid key is refused before it opens (403).

``API_KEYS`` is a comma-separated list, or the path of a file with one key a line (blank lines and
``#`` comments skipped); a value naming an existing file is read as one. Unset, any key (or none) is
accepted: OpenAI SDK clients send dummy keys. Probes, metrics and docs stay open. Keys are compared in
constant time against every configured key, and are never logged.

``ADMIN_API_KEYS`` (same format, only with ``API_KEYS``) are keys that are accepted too and may also
delete what other keys made (registered voices). Each accepted key is a *tenant*, named by a fingerprint
of the key (``tenant_of``): interleave ids live in its namespace, and a registered voice records it as
its owner. The fingerprint, never the key, is what a store holds.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl

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


Access = Literal["refused", "key", "admin"]


class ApiKeys:
    """The accepted keys; ``load`` (in the lifespan) reads them. Until then a protected app refuses all."""

    def __init__(self, spec: str, admin_spec: str = "") -> None:
        self.enabled = bool(spec.strip())
        self._spec = spec
        self._admin_spec = admin_spec
        self._keys: tuple[bytes, ...] = ()
        self._admin: tuple[bool, ...] = ()  # per key: an admin key

    async def load(self) -> None:
        """Read the keys; ValueError when API_KEYS is set but names no key (auth would be off), or
        ADMIN_API_KEYS is set without API_KEYS (it would grant nothing: everyone may do everything)."""
        if not self.enabled:
            if self._admin_spec.strip():
                raise ValueError("ADMIN_API_KEYS is set but API_KEYS is not: set both, or neither")
            log.info("API keys off: any Authorization header is accepted (API_KEYS is empty)")
            return
        source, keys = await asyncio.to_thread(parse_keys, self._spec)
        if not keys:
            raise ValueError(f"API_KEYS is set but its {source} holds no key")
        admin_keys: list[str] = []
        if self._admin_spec.strip():
            admin_source, admin_keys = await asyncio.to_thread(parse_keys, self._admin_spec)
            if not admin_keys:
                raise ValueError(f"ADMIN_API_KEYS is set but its {admin_source} holds no key")
        every = [(key, False) for key in keys if key not in admin_keys] + [(key, True) for key in admin_keys]
        self._keys = tuple(key.encode() for key, _ in every)
        self._admin = tuple(admin for _, admin in every)
        log.info("API keys on: %d key(s) from %s, %d admin key(s)", len(keys), source, len(admin_keys))

    def access(self, authorization: bytes) -> Access:
        """What ``Authorization: Bearer <key>`` may do: "refused", "key" or "admin" (every key is a plain
        one when keys are off)."""
        if not self.enabled:
            return "key"
        scheme, _, token = authorization.partition(b" ")
        token = token.strip()
        matched = admin = False
        # Every key is compared, with no early exit: the time does not depend on which key matched.
        for key, is_admin in zip(self._keys, self._admin, strict=True):
            same = hmac.compare_digest(token, key)
            matched |= same
            admin |= same and is_admin
        if scheme.lower() != b"bearer" or not token or not matched:
            return "refused"
        return "admin" if admin else "key"

    def accepts(self, authorization: bytes) -> bool:
        """True for ``Bearer <a configured key>`` (always, when keys are off)."""
        return self.access(authorization) != "refused"


def tenant_of(authorization: bytes) -> str:
    """The tenant of an accepted ``Bearer <key>``: the first 16 hex digits of the key's SHA-256."""
    token = authorization.partition(b" ")[2].strip()
    return hashlib.sha256(token).hexdigest()[:16]


def tenant(request: Request) -> str | None:
    """The request's tenant (None when API keys are off: one shared namespace)."""
    return getattr(request.state, "tenant", None)


def is_admin(request: Request) -> bool:
    """True when the request came with an admin key (``ADMIN_API_KEYS``)."""
    return bool(getattr(request.state, "admin", False))


def presented_key(scope: Scope) -> bytes:
    """The request's key as ``Bearer <key>``: its Authorization header, else an ``X-API-Key`` header,
    else (Cartesia's clients, browsers) an ``api_key`` query parameter; b"" when it has none."""
    headers = dict(scope["headers"])
    if authorization := headers.get(b"authorization", b""):
        return bytes(authorization)
    key = headers.get(b"x-api-key", b"")
    if not key:
        for name, value in parse_qsl(scope.get("query_string", b"").decode("latin-1")):
            if name == "api_key":
                key = value.encode("latin-1")
                break
    return b"Bearer " + key.strip() if key else b""


class AuthMiddleware:
    """401 with the OpenAI error body for a ``/v1`` request without a valid key."""

    def __init__(self, app: ASGIApp, keys: ApiKeys) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind, path = scope["type"], scope.get("path", "")
        protected = self.keys.enabled and (
            kind == "websocket"
            or (kind == "http" and (path.startswith(routes.API_PREFIX) or path in routes.KEYED_PATHS))
        )
        authorization = presented_key(scope) if protected else b""
        access = self.keys.access(authorization) if protected else "key"
        if access == "refused" and kind == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "invalid or missing API key"})
            return
        if access == "refused":
            error = Unauthorized(
                "Incorrect or missing API key: send 'Authorization: Bearer <key>'.",
                headers={"WWW-Authenticate": "Bearer"},
            )
            response = JSONResponse(error.body(), status_code=error.status, headers=error.headers)
            await response(scope, receive, send)
            return
        if protected:  # the key's tenant: a name for it that never reveals it (request.state.tenant)
            state = scope.setdefault("state", {})
            state["tenant"], state["admin"] = tenant_of(authorization), access == "admin"
        await self.app(scope, receive, send)
