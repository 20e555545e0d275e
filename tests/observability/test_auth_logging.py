"""API keys on /v1 (and only there), and the JSON log lines: trace ids, the access line, no secrets."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.api.auth import ApiKeys
from app.observability.logging import JsonFormatter
from tests.api.conftest import http_settings, serve, serve_app
from tests.api.test_speech_http import assert_openai_error
from tests.fakes.fake_vllm import FakeVLLM
from tests.observability.conftest import traced_app

SPEECH = "/v1/audio/speech"
BODY = {"input": "Hello there.", "voice": "husein"}
KEY = "sk-test-0123456789abcdef"


async def test_keys_guard_every_v1_route_and_nothing_else(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    settings = http_settings(tiny_codec_dir, fake_vllm.url, API_KEYS=f"other-key, {KEY}")
    async with serve(settings) as url, httpx.AsyncClient(timeout=10) as client:
        missing = await client.post(url + SPEECH, json=BODY)
        wrong = await client.post(url + SPEECH, json=BODY, headers={"Authorization": "Bearer nope"})
        not_bearer = await client.post(url + SPEECH, json=BODY, headers={"Authorization": KEY})
        voices = await client.get(url + "/v1/audio/voices")
        ok = await client.post(url + SPEECH, json=BODY, headers={"Authorization": f"Bearer {KEY}"})
        opened = [
            await client.get(url + path) for path in ("/health", "/ready", "/metrics", "/openapi.json", "/")
        ]
    for response in (missing, wrong, not_bearer, voices):
        error = assert_openai_error(response, 401)
        assert error["code"] == "invalid_api_key"
        assert response.headers["www-authenticate"] == "Bearer"
    assert ok.status_code == 200 and len(ok.content) == 48 * 480 * 2
    assert [r.status_code for r in opened] == [200] * 5


async def test_any_key_is_accepted_when_keys_are_off(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    async with serve(http_settings(tiny_codec_dir, fake_vllm.url)) as url, httpx.AsyncClient(timeout=10) as c:
        dummy = await c.post(url + SPEECH, json=BODY, headers={"Authorization": "Bearer not-needed"})
        none = await c.post(url + SPEECH, json=BODY)
    assert dummy.status_code == none.status_code == 200


async def test_keys_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text(f"# service keys\n{KEY}\n\nsecond\n")
    keys = ApiKeys(str(path))
    assert not keys.accepts(f"Bearer {KEY}".encode()), "nothing is accepted before the keys are loaded"
    await keys.load()
    assert keys.accepts(f"Bearer {KEY}".encode()) and keys.accepts(b"bearer second")
    assert not keys.accepts(b"Bearer # service keys") and not keys.accepts(b"Bearer ")
    path.write_text("# nothing\n")
    with pytest.raises(ValueError, match="holds no key"):
        await ApiKeys(str(path)).load()


async def test_admin_keys_are_api_keys_that_the_middleware_marks(tmp_path: Path) -> None:
    keys = ApiKeys(f"{KEY},shared", "admin-key, shared")
    await keys.load()
    assert keys.access(f"Bearer {KEY}".encode()) == "key"
    assert keys.access(b"Bearer admin-key") == keys.access(b"Bearer shared") == "admin"
    assert keys.access(b"Bearer other") == keys.access(b"Basic admin-key") == "refused"
    path = tmp_path / "admins"
    path.write_text("# admins\nfrom-file\n")
    from_file = ApiKeys(KEY, str(path))
    await from_file.load()
    assert from_file.access(b"Bearer from-file") == "admin"


async def test_admin_keys_without_api_keys_fail_at_startup() -> None:
    """They would grant nothing (without API_KEYS every client may do everything): a setup mistake."""
    with pytest.raises(ValueError, match="ADMIN_API_KEYS is set but API_KEYS is not"):
        await ApiKeys("", "admin-key").load()
    with pytest.raises(ValueError, match="ADMIN_API_KEYS is set but its list holds no key"):
        await ApiKeys(KEY, " , ").load()


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """Everything logged during the test, as JSON lines."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


async def test_json_lines_carry_trace_ids_and_one_access_line(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, json_log: io.StringIO
) -> None:
    app, _ = traced_app(http_settings(tiny_codec_dir, fake_vllm.url, API_KEYS=KEY))
    async with serve_app(app) as url, httpx.AsyncClient(timeout=10) as client:
        response = await client.post(
            url + SPEECH,
            json=BODY | {"response_format": "wav"},
            headers={"Authorization": f"Bearer {KEY}", "x-request-id": "req-42"},
        )
        assert response.status_code == 200
    logged = lines(json_log)
    access = [entry for entry in logged if entry["logger"] == "app.access"]
    assert len(access) == 1
    line = access[0]
    assert line["trace_id"] == response.headers["x-trace-id"]
    assert isinstance(line["span_id"], str) and len(line["span_id"]) == 16
    assert line["method"] == "POST" and line["path"] == SPEECH and line["status"] == 200
    assert line["voice"] == "husein" and line["format"] == "wav" and line["request_id"] == "req-42"
    assert line["audio_s"] == 48 / 50
    assert 0 < line["ttfb_s"] <= line["duration_s"]
    assert line["error"] is None and line["bytes"] == len(response.content)
    assert {"ts", "level", "message"} <= set(line)
    assert KEY not in json_log.getvalue()


async def test_access_line_without_spans_keeps_the_request_trace_id(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, json_log: io.StringIO
) -> None:
    async with serve(http_settings(tiny_codec_dir, fake_vllm.url)) as url, httpx.AsyncClient(timeout=10) as c:
        response = await c.post(url + SPEECH, json={"input": "Hi", "voice": "nobody"})
    access = [entry for entry in lines(json_log) if entry["logger"] == "app.access"]
    assert len(access) == 1
    assert access[0]["trace_id"] == response.headers["x-trace-id"]
    assert access[0]["span_id"] is None
    assert access[0]["status"] == 400 and access[0]["error"] == "validation"


def test_refusals_by_key_count_as_auth_errors() -> None:
    from app.core.errors import Forbidden
    from app.observability.requests import RequestRecord, error_kind

    record = RequestRecord("DELETE", "/v1/audio/voices/x")
    assert error_kind(403, None, record) == "auth"
    assert error_kind(None, Forbidden("not yours", param="name", code="voice_not_owned"), record) == "auth"
    assert error_kind(401, None, record) == "auth"
