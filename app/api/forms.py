"""Multipart forms whose text fields must be text: ``Utf8FormRoute``, the route class of the upload routes.

Starlette reads a text field whose bytes do not decode in the form's charset (UTF-8 unless the request's
Content-Type names another) as Latin-1, so a client's bytes would silently become other characters (a
transcript or a text to speak that nobody wrote). ``Utf8MultiPartParser`` is Starlette's parser except
that such a field is refused: ``FieldNotText``, which the installed handler answers with a 400
(``invalid_encoding``) naming the field. Limits, file spooling and every other error stay Starlette's.
Files are bytes and are not checked.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextlib import aclosing
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.datastructures import FormData
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

from app.core.errors import InvalidRequest


class FieldNotText(HTTPException):
    """Raised while parsing a form: the text field ``field`` does not decode in the form's charset."""

    def __init__(self, field: str, charset: str) -> None:
        super().__init__(400, f"the form field {field!r} is not {charset} text")
        self.field = field
        self.charset = charset


class Utf8MultiPartParser(MultiPartParser):
    """Starlette's multipart parser, refusing a text field that is not text in the form's charset."""

    def on_part_end(self) -> None:
        part = self._current_part  # Starlette's part being parsed (its name, bytes, and file if any)
        if part.file is None:
            charset = self._charset or "utf-8"
            try:
                bytes(part.data).decode(charset)
            except (UnicodeDecodeError, LookupError):
                raise FieldNotText(part.field_name, charset) from None
        super().on_part_end()


class Utf8FormRequest(Request):
    """A request whose multipart form is parsed by ``Utf8MultiPartParser`` (every other body as usual)."""

    async def _get_form(
        self,
        *,
        max_files: int | float = 1000,
        max_fields: int | float = 1000,
        max_part_size: int = 1024 * 1024,
    ) -> FormData:
        content_type = self.headers.get("content-type", "").partition(";")[0].strip().lower()
        if self._form is None and content_type == "multipart/form-data":
            async with aclosing(self.stream()) as stream:
                parser = Utf8MultiPartParser(
                    self.headers,
                    stream,
                    max_files=max_files,
                    max_fields=max_fields,
                    max_part_size=max_part_size,
                )
                try:
                    self._form = await parser.parse()
                except MultiPartException as exc:  # as Starlette answers its own parser's errors
                    raise HTTPException(400, exc.message) from exc
        return await super()._get_form(
            max_files=max_files, max_fields=max_fields, max_part_size=max_part_size
        )


class Utf8FormRoute(APIRoute):
    """A route whose form fields are parsed by ``Utf8FormRequest``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def with_text_fields(request: Request) -> Response:
            return await handler(Utf8FormRequest(request.scope, request.receive))

        return with_text_fields


def install_form_errors(app: FastAPI) -> None:
    """The handler that turns ``FieldNotText`` into the OpenAI error body (400 naming the field)."""

    async def on_not_text(request: Request, exc: FieldNotText) -> Response:
        field = exc.field[:64]
        error = InvalidRequest(
            f"{field}: not {exc.charset} text; send the field encoded as {exc.charset}",
            param=field,
            code="invalid_encoding",
        )
        return JSONResponse(error.body(), status_code=error.status)

    app.add_exception_handler(FieldNotText, on_not_text)  # type: ignore[arg-type]  # typed for Exception; ours take their own class
