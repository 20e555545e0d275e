"""The API reference pages, Swagger UI at ``/docs`` and Scalar at ``/scalar``, with their scripts and
styles served by this app, so both render with no network.

The assets come from two PyPI packages that ship the upstream builds unchanged and follow upstream's
version numbers: ``star-openapi-swagger`` (swagger-ui-dist) and ``star-openapi-scalar``
(``@scalar/api-reference``'s standalone build). Only their files are used (none of their code is
imported); the pages are FastAPI's own Swagger UI page and ``scalar_fastapi``'s page, pointed at them.
Scalar's options that would reach out (its web fonts, telemetry, the AI agent) are off.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from scalar_fastapi import AgentScalarConfig, get_scalar_api_reference

from app.core import routes

SWAGGER_ASSETS = routes.DOCS_ASSETS + "/swagger"
SCALAR_ASSETS = routes.DOCS_ASSETS + "/scalar"


def _package_dir(package: str, *parts: str) -> Path:
    """A folder of data files inside an installed package (found without importing its code)."""
    return Path(str(files(package).joinpath(*parts)))


def install_docs(app: FastAPI) -> None:
    """Mount the assets and add the two pages (the app is built with ``docs_url=None``)."""
    swagger = _package_dir("star_openapi_swagger", "templates", "swagger")
    scalar = _package_dir("star_openapi_scalar", "templates", "scalar")
    app.mount(SWAGGER_ASSETS, StaticFiles(directory=swagger), name="swagger-assets")
    app.mount(SCALAR_ASSETS, StaticFiles(directory=scalar), name="scalar-assets")
    oauth2_redirect = routes.SWAGGER_DOCS + "/oauth2-redirect"

    @app.get(routes.SWAGGER_DOCS, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        """Swagger UI over ``/openapi.json``."""
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{SWAGGER_ASSETS}/js/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{SWAGGER_ASSETS}/css/swagger-ui.css",
            swagger_favicon_url=f"{root}{SWAGGER_ASSETS}/images/swagger.svg",
            oauth2_redirect_url=f"{root}{oauth2_redirect}",
        )

    @app.get(oauth2_redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(routes.DOCS, include_in_schema=False)
    async def scalar_reference(request: Request) -> HTMLResponse:
        """The Scalar API reference over ``/openapi.json``."""
        root = request.scope.get("root_path", "")
        return get_scalar_api_reference(
            openapi_url=f"{root}{app.openapi_url}",
            title=app.title,
            scalar_js_url=f"{root}{SCALAR_ASSETS}/js/scalar.standalone.js",
            scalar_favicon_url=f"{root}{SCALAR_ASSETS}/images/scalar.svg",
            with_default_fonts=False,
            telemetry=False,
            agent=AgentScalarConfig(disabled=True),
        )
