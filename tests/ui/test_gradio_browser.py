"""gradio_app.py in a real browser (headless Debian chromium driven by Playwright, no network) against
the demo server serving both model families on the tiny fixtures: the in-process NeuCodec LM and codec,
and MOSS-TTS-Realtime (its voice prompts off, so one model takes reference audio and the other does
not). The page lists both models; choosing one sets its voices, its defaults and which tabs show; it
speaks with each (streamed, then the whole file played back); screenshots go to the test's tmp_path."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.api.conftest import serve
from tests.conftest import make_settings
from tests.ui.browser import LoopbackOnly, assert_not_blank, chromium, free_port, needs_chromium

ROOT = Path(__file__).resolve().parents[2]
NEUCODEC = "TTS-model"
MOSS = "moss-tts-realtime"
FAMILY = {NEUCODEC: "neucodec", MOSS: "moss"}
TEXT = "Hi."  # one generation even at the smallest cap (a longer text is spoken in parts, each capped)
MAX_TOKENS = {NEUCODEC: 50, MOSS: 13}  # about a second of audio each
SECONDS_PER_TOKEN = {NEUCODEC: 1 / 50, MOSS: 1 / 12.5}  # 50 codes per second; 12.5 frames per second

pytestmark = [pytest.mark.slow, needs_chromium]


@pytest.fixture
async def api_url(
    tiny_lm_dir: Path, tiny_codec_dir: Path, moss_tts_dir: Path, tiny_moss_codec_dir: Path, tmp_path: Path
) -> AsyncIterator[str]:
    """The server as the demo runs it on the fixtures, both families loaded (MOSS without voice prompts)."""
    settings = make_settings(
        LM_BACKEND="transformers",
        TTS_MODEL=str(tiny_lm_dir),
        CODEC_MODEL=str(tiny_codec_dir),
        DEVICE="cpu",
        MODEL_FAMILIES=["neucodec", "moss"],
        MOSS_TTS_MODEL=str(moss_tts_dir),
        MOSS_CODEC_MODEL=str(tiny_moss_codec_dir),
        MOSS_REFERENCE_VOICES=False,
        INTERLEAVE_STORE="memory",
        VOICES_DIR=str(tmp_path / "voices"),
    )
    async with serve(settings) as url:
        yield url


@pytest.fixture
def gradio_url(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``python gradio_app.py`` in a subprocess (started before the server is up: it only needs it
    once the page loads); its URL and its log, printed when the test fails."""
    port = free_port()
    env = os.environ | {"GRADIO_ANALYTICS_ENABLED": "False"}
    log_path = tmp_path / "gradio.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "gradio_app.py", "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=log
        )
    try:
        yield f"http://127.0.0.1:{port}", log_path
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        print(log_path.read_text(errors="replace")[-5000:])


async def wait_until_up(url: str, timeout_s: float = 60.0) -> None:
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
            await asyncio.sleep(0.3)


async def choose(page: Page, label: str, option: str) -> None:
    """Pick ``option`` in the Gradio dropdown labelled ``label``, as a person would."""
    await page.get_by_label(label, exact=True).click()
    await page.get_by_role("option", name=option, exact=True).click()


async def options_of(page: Page, label: str) -> list[str]:
    """The options the dropdown labelled ``label`` offers (opened, read, closed)."""
    await page.get_by_label(label, exact=True).click()
    options = page.get_by_role("option")
    await expect(options.first).to_be_visible()
    names = [name.split("\n")[-1].strip() for name in await options.all_inner_texts()]  # past the tick
    await page.get_by_label(label, exact=True).blur()
    await expect(options.first).to_be_hidden()
    return names


async def playable_duration(page: Page, selector: str) -> float:
    """Wait until the ``<audio>`` under ``selector`` has a source and loaded metadata; its duration (s)."""
    audio = page.locator(f"{selector} audio[src]").first
    await expect(audio).to_have_attribute("src", re.compile(r".+"), timeout=20000)
    handle = await audio.element_handle()
    assert handle is not None
    await page.wait_for_function("el => el.readyState >= 1 && el.duration > 0", arg=handle, timeout=20000)
    return float(await handle.evaluate("el => el.duration"))


async def speak_with(page: Page, model: str, default_max_tokens: str) -> float:
    """Choose ``model`` (another than the chosen one), wait for its defaults to land, cap its max
    tokens, generate (streamed); the whole file's duration (s)."""
    await choose(page, "Model", f"{model} ({FAMILY[model]})")
    # the choice's updates land together: once the description names the family, the max-tokens field
    # holds its default and no later update overwrites what is filled in below
    await expect(page.locator("#model-info")).to_contain_text(f"family {FAMILY[model]}")
    max_tokens = page.locator("#speech-max-tokens input")
    await expect(max_tokens).to_have_value(default_max_tokens)
    for attempt in range(3):  # under load the choice's defaults were seen to land after the fill
        await max_tokens.fill(str(MAX_TOKENS[model]))
        await max_tokens.blur()
        await asyncio.sleep(0.5)
        if await max_tokens.input_value() == str(MAX_TOKENS[model]) or attempt == 2:
            break
    await expect(max_tokens).to_have_value(str(MAX_TOKENS[model]))
    await page.get_by_role("button", name="Generate speech").click()
    status = page.locator("#speech-status")
    await expect(status).to_contain_text(f"{model}: TTFB", timeout=30000)
    await expect(status).to_contain_text("total")
    return await playable_duration(page, "#speech-audio")


async def test_gradio_app_picks_models_and_speaks_with_each(
    gradio_url: tuple[str, Path], api_url: str, tmp_path: Path
) -> None:
    url, _ = gradio_url
    async with httpx.AsyncClient() as client:
        cards = (await client.get(api_url + "/v1/models")).json()["data"]
    defaults = {card["id"]: str(card["defaults"]["max_tokens"]) for card in cards}
    await wait_until_up(url)
    guard = LoopbackOnly()
    async with chromium(tmp_path) as browser:
        page = await browser.new_page()
        await guard.attach(page)
        await page.goto(url)
        await page.get_by_label("API base URL").fill(api_url)
        await page.get_by_role("button", name="Check connection").click()
        await expect(page.locator("#connection-status")).to_contain_text("Connected", timeout=20000)

        models = await options_of(page, "Model")
        assert f"{NEUCODEC} (neucodec)" in models and f"{MOSS} (moss)" in models

        await choose(page, "Model", f"{MOSS} (moss)")
        await expect(page.locator("#model-info")).to_contain_text("family moss")
        assert "default" in (voices := await options_of(page, "Voice")) and "husein" not in voices
        await expect(page.locator("#speech-max-tokens input")).to_have_value(defaults[MOSS])
        await page.get_by_role("tab", name="Voice conversion").click()  # its voice prompts are off
        await expect(page.locator("#vc-unavailable")).to_be_visible()
        await expect(page.get_by_role("button", name="Convert")).to_be_disabled()
        await page.get_by_role("tab", name="Speech").click()

        await choose(page, "Model", f"{NEUCODEC} (neucodec)")
        await expect(page.locator("#model-info")).to_contain_text("family neucodec")
        assert "husein" in (voices := await options_of(page, "Voice")) and "default" not in voices
        await expect(page.locator("#speech-max-tokens input")).to_have_value(defaults[NEUCODEC])
        await page.get_by_role("tab", name="Voice conversion").click()
        await expect(page.get_by_role("button", name="Convert")).to_be_enabled()
        await expect(page.locator("#vc-unavailable")).to_be_hidden()
        await expect(page.locator("#vc-max-tokens input")).to_have_value(defaults[NEUCODEC])
        await page.get_by_role("tab", name="Speech").click()

        await page.locator("#speech-text textarea").fill(TEXT)
        durations = {}
        for model in (MOSS, NEUCODEC):  # NeuCodec is chosen now: each choice changes the model
            durations[model] = await speak_with(page, model, defaults[model])
            shot = tmp_path / f"gradio_{FAMILY[model]}.png"
            await page.screenshot(path=str(shot), full_page=True)
            assert_not_blank(shot)

        await page.get_by_role("tab", name="Normalization").click()  # no model involved
        await page.get_by_role("button", name="Normalize").click()
        output = page.locator("#normalized-output textarea")
        await expect(output).to_have_value(re.compile("ringgit"), timeout=20000)
    assert guard.outside == []
    for model, seconds in durations.items():  # the page's max_tokens reached the server
        assert seconds <= MAX_TOKENS[model] * SECONDS_PER_TOKEN[model] + 0.05, (model, seconds)
