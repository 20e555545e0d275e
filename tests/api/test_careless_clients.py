"""Careless and hostile requests end to end, against the app served with ``python -m app``'s options:
names that are not what they look like, paths that would forge log lines, option combinations that
cannot all be honoured, texts that read out far longer than they are written, form fields that are
not UTF-8."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from app.observability.logging import make_handler
from tests.api.conftest import REFERENCE_TEXT
from tests.api.test_hostile_http import serve_as_main, settings_for
from tests.api.test_speech_http import assert_openai_error
from tests.conftest import make_settings
from tests.fakes.fake_vllm import FakeVLLM

SPEECH, VC, VOICES = "/v1/audio/speech", "/v1/audio/vc", "/v1/audio/voices"


@pytest.fixture
async def url(tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path) -> AsyncIterator[str]:
    async with serve_as_main(settings_for(tiny_codec_dir, fake_vllm, tmp_path)) as base:
        yield base


async def register(client: httpx.AsyncClient, name: str, audio: bytes) -> httpx.Response:
    data = {"name": name, "reference_text": REFERENCE_TEXT}
    return await client.post(VOICES, data=data, files={"audio_sample": ("a.wav", audio)})


# --- names are matched whole ------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["\n", "\r\n", "\x00", " ", "\t"])
async def test_a_voice_name_with_a_trailing_newline_is_no_second_name(
    url: str, reference_wav: bytes, suffix: str
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        assert (await register(client, "abc", reference_wav)).status_code == 201
        twin = await register(client, "abc" + suffix, reference_wav)
        assert assert_openai_error(twin, 400, "name")["code"] == "invalid_voice_name"
        names = [v["name"] for v in (await client.get(VOICES)).json()["voices"] if v["type"] == "registered"]
    assert names == ["abc"]


# --- control characters never reach a text log line as themselves ---------------------------------


@pytest.fixture
def text_log() -> Iterator[io.StringIO]:
    """Everything logged while the test runs, as the text log format writes it."""
    stream = io.StringIO()
    handler = make_handler(make_settings(LOG_FORMAT="text"), stream)
    root = logging.getLogger()
    saved = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(saved)


RECORD_HEAD = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3} [A-Z]+ \S+ ")
CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


@pytest.mark.parametrize(
    ("path", "escaped"),
    [
        (
            "/v1/x%0A2026-01-01%2000:00:00,000%20INFO%20app.access%20GET%20/forged%20200",
            "/v1/x\\x0a2026-01-01 00:00:00,000 INFO app.access GET /forged 200",
        ),
        ("/v1/x%0D%1B[2K%1B]0;owned%07", "/v1/x\\x0d\\x1b[2K\\x1b]0;owned\\x07"),
        ("/v1/x%C2%9B31m%E2%80%A8forged", "/v1/x\\x9b31m\\u2028forged"),
    ],
    ids=["newline", "terminal_escapes", "c1_and_line_separator"],
)
async def test_a_path_with_control_characters_cannot_forge_or_colour_a_text_log_line(
    url: str, text_log: io.StringIO, path: str, escaped: str
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        assert (await client.get(path)).status_code == 404
    lines = [line for line in text_log.getvalue().split("\n") if line]
    access = [line for line in lines if " app.access " in line]
    assert len(access) == 1, lines
    for line in lines:
        assert RECORD_HEAD.match(line), f"a line that is no record: {line!r}"
        assert not CONTROLS.search(line), line
    assert f"GET {escaped} 404 " in access[0], access[0]


async def test_json_log_lines_escape_every_control_character(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path
) -> None:
    stream = io.StringIO()
    handler = make_handler(make_settings(LOG_FORMAT="json"), stream)
    access = logging.getLogger("app.access")
    access.addHandler(handler)
    saved = access.level
    access.setLevel(logging.INFO)
    try:
        async with (
            serve_as_main(settings_for(tiny_codec_dir, fake_vllm, tmp_path)) as base,
            httpx.AsyncClient(base_url=base, timeout=10) as client,
        ):
            await client.get("/v1/x%0A%1B[2K%C2%9B%E2%80%A8%E2%80%A9end")
    finally:
        access.removeHandler(handler)
        access.setLevel(saved)
    (line,) = stream.getvalue().splitlines()
    assert not CONTROLS.search(line), line
    assert json.loads(line)["path"] == "/v1/x\n\x1b[2K\x9b\u2028\u2029end"


def test_a_traceback_keeps_its_lines_indented_under_its_record() -> None:
    """A record's first line is the only one at column 0: an exception's own message cannot start one."""
    stream = io.StringIO()
    logger = logging.getLogger("tests.careless")
    handler = make_handler(make_settings(LOG_FORMAT="text"), stream)
    logger.addHandler(handler)
    try:
        try:
            raise ValueError("bad\n2026-01-01 00:00:00,000 INFO app.access GET /forged 200\x1b[31m")
        except ValueError:
            logger.exception("failed for %s", "client\x1b[2J")
    finally:
        logger.removeHandler(handler)
    first, *rest = stream.getvalue().rstrip("\n").split("\n")
    assert RECORD_HEAD.match(first) and "client\\x1b[2J" in first
    assert rest and all(line.startswith("  ") for line in rest), rest
    assert "\x1b" not in stream.getvalue()
