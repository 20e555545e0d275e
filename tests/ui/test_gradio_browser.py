"""gradio_app.py in a real browser: headless Debian chromium driven by Playwright, against the API on
the tiny fixtures with a fake vLLM. Checks the connection, speaks (streamed), normalizes, and saves a
screenshot of each tab to ``bench/results/tmp/gradio_*.png`` (git-ignored; the paths are printed)."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, async_playwright, expect

from tests.api.conftest import http_settings, serve
from tests.fakes.fake_vllm import FakeVLLM, Script

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
# the closed network refuses chromium's background connections: switch them off
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = ROOT / "bench" / "results" / "tmp"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium (make system-deps)"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
async def api_url(tiny_codec_dir: Path) -> AsyncIterator[str]:
    """The API on the tiny codec, wired to a fake vLLM pacing 200 tokens/s."""
    fake = FakeVLLM(Script(tokens_per_event=4, tokens_per_s=200))
    await fake.start()
    try:
        async with serve(http_settings(tiny_codec_dir, fake.url, REFERENCE_VOICES=False)) as url:
            yield url
    finally:
        await fake.stop()


@pytest.fixture
def gradio_url(api_url: str, tmp_path: Path) -> Iterator[str]:
    """``python gradio_app.py`` in a subprocess pointed at ``api_url``; its URL. Its log shows on failure."""
    port = free_port()
    env = os.environ | {"TTS_API_BASE_URL": api_url, "GRADIO_ANALYTICS_ENABLED": "False"}
    log_path = tmp_path / "gradio.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "gradio_app.py", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log
        )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        print(log_path.read_text(errors="replace")[-5000:])  # pytest shows it when the test fails


async def wait_until_up(url: str, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            try:
                if (await client.get(url)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not come up")
            await asyncio.sleep(0.5)


async def check_playable(page: Page, selector: str) -> float:
    """Wait until the ``<audio>`` under ``selector`` has loaded metadata; its duration (s)."""
    audio = page.locator(f"{selector} audio[src]").first
    await expect(audio).to_have_attribute("src", re.compile(r".+"), timeout=20000)
    handle = await audio.element_handle()
    assert handle is not None
    await page.wait_for_function("el => el.readyState >= 1 && el.duration > 0", arg=handle, timeout=20000)
    return float(await handle.evaluate("el => el.duration"))


async def screenshot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / name), full_page=True)
    print(f"screenshot: {SCREENSHOTS / name}")


async def test_gradio_app_in_chromium(gradio_url: str) -> None:
    await wait_until_up(gradio_url)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(gradio_url)
            await page.get_by_role("button", name="Check connection").click()
            await expect(page.locator("#connection-status")).to_contain_text("Connected", timeout=20000)
            await expect(page.locator("#connection-status")).to_contain_text("tts-1")

            await page.get_by_role("button", name="Generate speech").click()
            status = page.locator("#speech-status")
            await expect(status).to_contain_text("total", timeout=60000)
            await expect(status).to_contain_text("TTFB")
            assert await check_playable(page, "#speech-audio") > 0.2
            await screenshot(page, "gradio_speech.png")

            await page.get_by_role("tab", name="Normalization").click()
            await page.get_by_role("button", name="Normalize").click()
            output = page.locator("#normalized-output textarea")
            await expect(output).to_have_value(re.compile("ringgit"), timeout=20000)
            await screenshot(page, "gradio_normalize.png")
        finally:
            await browser.close()
