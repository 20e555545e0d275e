"""A stand-in for the Hugging Face Hub on 127.0.0.1 that refuses every repository the way the Hub does.

``huggingface_hub`` reads the ``X-Error-Code`` header of an error response: ``RepoNotFound`` (a
misspelled or private id, 404 or 401) becomes ``RepositoryNotFoundError``, ``GatedRepo`` (403) becomes
``GatedRepoError``. Point ``HF_ENDPOINT`` at ``url``; every request is recorded in ``requests``.
"""

from __future__ import annotations

from typing import Literal

from aiohttp import web

Refusal = Literal["not_found", "gated"]
_RESPONSES: dict[Refusal, tuple[int, str, str]] = {
    "not_found": (404, "RepoNotFound", "Repository not found"),
    "gated": (403, "GatedRepo", "Access to model is restricted; you must be authenticated"),
}


class FakeHub:
    """Answers every request with the Hub's error for ``refusal``."""

    def __init__(self, refusal: Refusal) -> None:
        self.refusal = refusal
        self.requests: list[str] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._refuse)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _refuse(self, request: web.Request) -> web.Response:
        self.requests.append(f"{request.method} {request.path}")
        status, code, message = _RESPONSES[self.refusal]
        return web.json_response(
            {"error": message}, status=status, headers={"X-Error-Code": code, "X-Error-Message": message}
        )
