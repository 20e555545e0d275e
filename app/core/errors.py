"""Typed errors raised anywhere in the pipeline and turned into the OpenAI error body in one place.

Every failure that can happen before the first audio byte is one of these; `app.api.errors` maps
them to ``{"error": {"message", "type", "param", "code"}}`` with ``status``.
"""

from __future__ import annotations

ECHO_CHARS = 64
"""Most characters of a client's own value quoted back in an error message."""


def echo(value: str, limit: int = ECHO_CHARS) -> str:
    """``value`` quoted for an error message, cut to ``limit`` characters (a 10 MB field is not sent back)."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + f"... ({len(value)} characters)"


class APIError(Exception):
    """Base class: an HTTP status plus the four OpenAI error fields."""

    status: int = 500
    type: str = "server_error"
    code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.param = param
        if code is not None:
            self.code = code
        self.headers = headers or {}

    def __str__(self) -> str:
        """The message, and the detail for the logs (``detail`` never reaches a client)."""
        return f"{self.message} ({self.detail})" if self.detail else self.message

    def body(self) -> dict[str, dict[str, str | None]]:
        """The OpenAI error envelope for this error."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class InvalidRequest(APIError):
    """400: the request is well-formed but cannot be served (unknown voice, unsupported option)."""

    status = 400
    type = "invalid_request_error"
    code = "invalid_value"


class InvalidAudio(InvalidRequest):
    """400: a reference clip that cannot be used (unreadable, out of range, refused by the encoder). The
    stages raise it without a field; the service names the route's own (``reference_audio``,
    ``audio_sample``)."""

    code = "invalid_audio"


class ValidationFailed(APIError):
    """422: a field is missing, has the wrong type or is out of range (pydantic validation)."""

    status = 422
    type = "invalid_request_error"
    code = "invalid_value"


class NotFound(APIError):
    """404: an unknown model or resource."""

    status = 404
    type = "invalid_request_error"
    code = "not_found"


class BackendError(APIError):
    """502: the LM backend answered with an error, dropped the connection or sent garbage."""

    status = 502
    type = "server_error"
    code = "backend_error"


class BackendTimeout(APIError):
    """504: the LM backend did not connect, start or continue within its timeout."""

    status = 504
    type = "server_error"
    code = "backend_timeout"


class Unavailable(APIError):
    """503: the server cannot take the work now (engine not ready, decode queue timed out)."""

    status = 503
    type = "server_error"
    code = "unavailable"


class Conflict(APIError):
    """409: the request clashes with the current state (a name that is already taken)."""

    status = 409
    type = "invalid_request_error"
    code = "conflict"


class PayloadTooLarge(APIError):
    """413: an upload is larger than the server accepts (MAX_UPLOAD_BYTES)."""

    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class Unauthorized(APIError):
    """401: API keys are configured and the request has no valid ``Authorization: Bearer`` key."""

    status = 401
    type = "invalid_request_error"
    code = "invalid_api_key"


class Forbidden(APIError):
    """403: the key is valid but may not do this (delete a voice another key registered)."""

    status = 403
    type = "invalid_request_error"
    code = "permission_denied"


class RateLimited(APIError):
    """429: every stream slot is busy and the wait queue is full or the wait ran out (``Retry-After``)."""

    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"


class ClientDisconnected(Exception):
    """The client went away before the response started; there is nobody to answer."""


class HeadersTooLarge(APIError):
    """431: the request line and headers are larger than the server reads (MAX_HEADER_BYTES)."""

    status = 431
    type = "invalid_request_error"
    code = "request_header_fields_too_large"


class RequestTimeout(APIError):
    """408: the client did not send the request's headers or the next part of its body in time."""

    status = 408
    type = "invalid_request_error"
    code = "request_timeout"
