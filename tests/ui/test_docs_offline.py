"""``/docs`` (Swagger UI) and ``/scalar`` render in headless chromium with the network closed: their
scripts and styles come from the app itself. The operation list is checked as the page's scripts
render it from ``/openapi.json`` (the path is not in the HTML the server sends), and any request that
leaves the loopback fails the test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import expect

from tests.api.conftest import http_settings, serve
from tests.fakes.fake_vllm import FakeVLLM, Script
from tests.ui.browser import LoopbackOnly, assert_not_blank, chromium, needs_chromium

pytestmark = [pytest.mark.slow, needs_chromium]

OPERATION = "/v1/audio/speech"


@pytest.fixture
async def api_url(tiny_codec_dir: Path) -> AsyncIterator[str]:
    fake = FakeVLLM(Script(tokens_per_event=4))
    await fake.start()
    try:
        async with serve(http_settings(tiny_codec_dir, fake.url, REFERENCE_VOICES=False)) as url:
            yield url
    finally:
        await fake.stop()


@pytest.mark.parametrize(
    ("path", "operation"),
    [
        ("/docs", f".opblock-summary-path[data-path='{OPERATION}']"),  # Swagger UI's operation row
        ("/scalar", f'text="{OPERATION}"'),  # its path, as Scalar writes it on the operation
    ],
    ids=["swagger-ui", "scalar"],
)
async def test_page_renders_offline(api_url: str, tmp_path: Path, path: str, operation: str) -> None:
    async with httpx.AsyncClient() as client:
        html = (await client.get(api_url + path)).text
    assert OPERATION not in html  # only the page's scripts can put it on screen
    guard = LoopbackOnly()
    async with chromium(tmp_path) as browser:
        page = await browser.new_page()
        await guard.attach(page)
        await page.goto(api_url + path)
        await expect(page.locator(operation).first).to_be_visible(timeout=30000)
        shot = tmp_path / f"{path.strip('/')}.png"
        await page.screenshot(path=str(shot))
    assert guard.outside == []
    assert guard.failed == []
    assert_not_blank(shot)
