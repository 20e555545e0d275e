"""Headless Debian chromium driven by Playwright (its own browser download is never used), with no way
out of this machine: the resolver maps every host but the loopback names to nothing, and every page
request is checked so a non-loopback one fails the test that made it."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from PIL import Image
from playwright.async_api import BrowserContext, Page, Route, async_playwright

CHROMIUM = "/usr/bin/chromium"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
]

needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs Debian's chromium (make system-deps)"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@asynccontextmanager
async def chromium(tmp_path: Path) -> AsyncIterator[BrowserContext]:
    """A headless chromium on a fresh profile (user data dir) under ``tmp_path``; closed on exit."""
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            await context.close()


class LoopbackOnly:
    """Aborts every request of a page that leaves the loopback and remembers it (``outside``); also
    remembers loopback requests that failed or answered 4xx/5xx (``failed``)."""

    def __init__(self) -> None:
        self.outside: list[str] = []
        self.failed: list[str] = []

    async def attach(self, page: Page) -> None:
        await page.route("**/*", self._route)
        page.on("requestfailed", lambda request: self.failed.append(f"{request.url}: {request.failure}"))
        page.on(
            "response",
            lambda response: (
                self.failed.append(f"{response.url}: {response.status}") if response.status >= 400 else None
            ),
        )

    async def _route(self, route: Route) -> None:
        url = route.request.url
        if urlsplit(url).scheme in ("data", "blob") or urlsplit(url).hostname in LOOPBACK:
            await route.continue_()
            return
        self.outside.append(url)
        await route.abort("addressunreachable")


def assert_not_blank(path: Path) -> None:
    """The screenshot at ``path`` shows something: at least 2% of its pixels differ from the most common
    colour (the background), in at least 16 colours."""
    with Image.open(path) as image:
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 24)
    assert colours is not None
    total = sum(count for count, _ in colours)
    background = max(count for count, _ in colours)
    assert len(colours) >= 16, f"{path}: {len(colours)} colours"
    assert (total - background) / total >= 0.02, f"{path}: {background / total:.1%} is one colour"
