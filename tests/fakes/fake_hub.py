"""A stand-in for the Hugging Face Hub on 127.0.0.1: it serves the files of local directories as
repositories, or refuses every repository the way the Hub does.

Serving follows the routes ``huggingface_hub.snapshot_download`` uses: ``GET /api/models/{id}/revision/
{rev}`` (the commit ``sha``), ``GET /api/models/{id}/tree/{sha}`` (the file list, with sizes) and
``HEAD``/``GET /{id}/resolve/{sha}/{path}`` (``X-Repo-Commit``, ``ETag`` and the bytes, sent in
``chunk_bytes`` pieces ``chunk_delay_s`` apart so a download takes a while). Refusing sets the
``X-Error-Code`` header the client reads: ``RepoNotFound`` (a misspelled or private id, 404) becomes
``RepositoryNotFoundError``, ``GatedRepo`` (403) ``GatedRepoError``. Point ``HF_ENDPOINT`` at ``url``;
every request is recorded in ``requests``.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Literal

from aiohttp import web

Refusal = Literal["not_found", "gated"]
_REFUSALS: dict[Refusal, tuple[int, str, str]] = {
    "not_found": (404, "RepoNotFound", "Repository not found"),
    "gated": (403, "GatedRepo", "Access to model is restricted; you must be authenticated"),
}
SHA = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    """Serves ``repos`` (id -> directory); any other id gets the Hub's error for ``refusal``."""

    def __init__(
        self,
        refusal: Refusal = "not_found",
        repos: dict[str, Path] | None = None,
        chunk_bytes: int = 64 * 1024,
        chunk_delay_s: float = 0.0,
    ) -> None:
        self.refusal = refusal
        self.repos = repos or {}
        self.chunk_bytes = chunk_bytes
        self.chunk_delay_s = chunk_delay_s
        self.requests: list[str] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
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

    def _repo(self, path: str) -> tuple[str, Path, str] | None:
        """(id, directory, rest of the path) of a served repository named in ``path``."""
        for repo_id, directory in self.repos.items():
            for prefix in (f"/api/models/{repo_id}/", f"/{repo_id}/"):
                if path.startswith(prefix):
                    return repo_id, directory, path[len(prefix) :]
        return None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(f"{request.method} {request.path}")
        found = self._repo(request.path)
        if found is None:
            status, code, message = _REFUSALS[self.refusal]
            headers = {"X-Error-Code": code, "X-Error-Message": message}
            return web.json_response({"error": message}, status=status, headers=headers)
        repo_id, directory, rest = found
        if request.path.startswith("/api/models/") and rest.startswith("revision/"):
            return web.json_response({"id": repo_id, "sha": SHA, "siblings": []})
        if request.path.startswith("/api/models/") and rest.startswith("tree/"):
            files = sorted(p for p in directory.rglob("*") if p.is_file())
            tree = [
                {
                    "type": "file",
                    "path": str(p.relative_to(directory)),
                    "size": p.stat().st_size,
                    "oid": _oid(p),
                }
                for p in files
            ]
            return web.json_response(tree)
        if rest.startswith("resolve/"):
            file = directory / rest.split("/", 2)[2]
            if not file.is_file():
                return web.json_response(
                    {"error": "Entry not found"}, status=404, headers={"X-Error-Code": "EntryNotFound"}
                )
            return await self._send_file(request, file)
        return web.json_response({"error": "unknown route"}, status=404)

    async def _send_file(self, request: web.Request, file: Path) -> web.StreamResponse:
        data = file.read_bytes()
        headers = {"X-Repo-Commit": SHA, "ETag": f'"{_oid(file)}"', "Content-Length": str(len(data))}
        if request.method == "HEAD":
            return web.Response(headers=headers)
        response = web.StreamResponse(headers=headers)
        await response.prepare(request)
        for start in range(0, len(data), self.chunk_bytes):
            await response.write(data[start : start + self.chunk_bytes])
            if self.chunk_delay_s:
                await asyncio.sleep(self.chunk_delay_s)
        await response.write_eof()
        return response


def _oid(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()
