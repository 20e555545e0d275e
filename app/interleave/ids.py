"""Interleave ids: which one a request names, the store key it maps to, and its header echo.

An id is caller-controlled text (up to 256 characters, anything JSON or a header can carry). It never
becomes a path or a raw key: stores use ``digest(id)``, a SHA-256 hex string.
"""

from __future__ import annotations

import hashlib
from urllib.parse import quote

from app.core.defaults import MAX_INTERLEAVE_ID_CHARS as MAX_ID_CHARS
from app.core.errors import ValidationFailed

HEADER = "X-Interleave-Id"


def header_id(raw: str | None) -> str | None:
    """The id of an ``X-Interleave-Id`` header as the server read it (latin-1): UTF-8 text when its bytes
    are UTF-8, else the latin-1 text; None when absent or blank. 422 past 256 characters."""
    if raw is None:
        return None
    try:
        value = raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        value = raw
    value = value.strip()
    if len(value) > MAX_ID_CHARS:
        raise ValidationFailed(
            f"{HEADER}: at most {MAX_ID_CHARS} characters are accepted, got {len(value)}", param=HEADER
        )
    return value or None


def interleave_id(body: str | None, header: str | None) -> str | None:
    """The request's interleave id: the body field when set (non-empty), else the header's."""
    return body if body else header_id(header)


def scoped(interleave_id: str, tenant: str | None) -> str:
    """The id as the store knows it: in the namespace of ``tenant`` (one per API key) when keys are on,
    so that one key can neither read nor overwrite nor delete another key's conversation."""
    return interleave_id if tenant is None else f"{tenant}/{interleave_id}"


def digest(interleave_id: str) -> str:
    """The store key of an id: SHA-256 of its UTF-8 bytes (lone surrogates kept), 64 hex characters."""
    return hashlib.sha256(interleave_id.encode("utf-8", "surrogatepass")).hexdigest()


def header_echo(interleave_id: str) -> str:
    """The id for a response header: as is when printable ASCII, else percent-encoded UTF-8."""
    if interleave_id.isascii() and interleave_id.isprintable():
        return interleave_id
    return quote(interleave_id.encode("utf-8", "surrogatepass"), safe="")
