"""Careless and hostile requests end to end, against the app served with ``python -m app``'s options:
names that are not what they look like, paths that would forge log lines, option combinations that
cannot all be honoured, texts that read out far longer than they are written, form fields that are
not UTF-8."""

from __future__ import annotations

import base64
import io
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf

from app.audio import io as audio_io
from app.observability.logging import make_handler
from tests.api.conftest import REFERENCE_TEXT
from tests.api.test_hostile_http import serve_as_main, settings_for
from tests.api.test_moss_http import serve_moss
from tests.api.test_moss_http import settings_for as moss_settings
from tests.api.test_speech_http import assert_openai_error, body
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


# --- every option asked for is honoured, or refused before any audio --------------------------------


def _vc_fields(**fields: str) -> dict[str, str]:
    return {"reference_text": REFERENCE_TEXT, "generate_text": "Say this."} | fields


async def test_sse_without_streaming_is_refused_naming_both_fields(
    url: str, fake_vllm: FakeVLLM, reference_wav: bytes
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        speech = await client.post(SPEECH, json=body(stream=False, stream_format="sse"))
        files = {"reference_audio": ("a.wav", reference_wav)}
        vc = await client.post(VC, data=_vc_fields(stream="false", stream_format="sse"), files=files)
        for refused in (speech, vc):
            error = assert_openai_error(refused, 400, "stream_format")
            assert error["code"] == "incompatible_options"
            assert "stream: false" in str(error["message"]) and "stream_format" in str(error["message"])
        assert fake_vllm.requests == []
        streamed = await client.post(SPEECH, json=body(stream_format="sse"))
        whole = await client.post(SPEECH, json=body(stream=False, stream_format="audio"))
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert whole.status_code == 200 and whole.headers["content-type"] == "audio/pcm"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"prompt": "Read numbers in Malay.", "mode": "rule"}, "prompt"),
        ({"prompt": "Read numbers in Malay.", "mode": "spoken"}, "prompt"),
        ({"prompt": "Read numbers in Malay."}, "prompt"),  # the default mode is rule
        ({"normalize_malaysian": True, "mode": "llm"}, "normalize_malaysian"),
    ],
)
async def test_text_options_of_another_mode_are_refused_on_every_text_route(
    url: str, fake_vllm: FakeVLLM, reference_wav: bytes, fields: dict[str, object], param: str
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        speech = await client.post(SPEECH, json=body(**fields))
        normalize = await client.post("/v1/audio/normalize", json={"input": "Hi 3 times."} | fields)
        form = {
            key: str(value).lower() if isinstance(value, bool) else str(value)
            for key, value in fields.items()
        }
        files = {"reference_audio": ("a.wav", reference_wav)}
        vc = await client.post(VC, data=_vc_fields(**form), files=files)
    for refused in (speech, normalize, vc):
        assert assert_openai_error(refused, 400, param)["code"] == "incompatible_options"
    assert fake_vllm.requests == []


@pytest.mark.parametrize(
    "fields",
    [
        {"prompt": "Read numbers in Malay.", "mode": "llm"},  # no llm configured: spoken, as documented
        {"normalize_malaysian": True, "mode": "rule"},
        {"normalize_malaysian": False, "mode": "spoken"},
        {"prompt": "", "mode": "spoken"},
    ],
)
async def test_text_options_of_the_mode_in_use_are_accepted(url: str, fields: dict[str, object]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        assert (await client.post(SPEECH, json=body(stream=False, **fields))).status_code == 200


async def test_malaysian_pronunciations_apply_in_spoken_mode_when_asked(
    url: str, fake_vllm: FakeVLLM
) -> None:
    text = "Datang ke KL esok."
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        for malaysian in (False, True):
            fields = {"input": text, "mode": "spoken", "normalize_malaysian": malaysian}
            normalized = await client.post("/v1/audio/normalize", json=fields)
            assert ("K L" in normalized.json()["output"]) is malaysian, normalized.text
            assert (await client.post(SPEECH, json=body(stream=False, **fields))).status_code == 200
    prompts = [request.body["prompt"] for request in fake_vllm.requests]
    assert ["K L" in prompt for prompt in prompts] == [False, True], prompts


@pytest.mark.parametrize(("playback_speed", "frames"), [(None, 1), (0.4, 5), (0.05, 1)])
async def test_playback_speed_sizes_the_first_moss_decode(
    monkeypatch: pytest.MonkeyPatch,
    tiny_codec_dir: Path,
    tiny_moss_codec_dir: Path,
    fake_vllm: FakeVLLM,
    tmp_path: Path,
    playback_speed: float | None,
    frames: int,
) -> None:
    """``playback_speed`` is the first decode's audio in seconds: for MOSS that many 80 ms frames
    (MOSS_FIRST_CHUNK_FRAMES when unset), the first SSE delta's length."""
    settings = moss_settings(tiny_codec_dir, tiny_moss_codec_dir, fake_vllm.url, tmp_path)
    request = {
        "model": "moss-tts-realtime",
        "input": "one two three four five",
        "stream_format": "sse",
        "stream_normalize": False,
        "playback_speed": playback_speed,
        "playback_overlap_speed": 0.5,  # the causal MOSS codec needs no future context: same audio
    }
    async with (
        asynccontextmanager(serve_moss)(monkeypatch, settings) as served,
        httpx.AsyncClient(base_url=served.url, timeout=30) as client,
    ):
        response = await client.post(SPEECH, json=request)
    assert response.status_code == 200, response.text
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    deltas = [base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta"]
    assert len(deltas[0]) == frames * 1920 * 2
    assert sum(map(len, deltas)) == 10 * 1920 * 2


# --- smaller: spoken length, the field an encode error names, form fields that are not UTF-8 --------


async def test_a_text_that_reads_out_far_longer_than_written_is_400_before_any_audio(
    url: str, fake_vllm: FakeVLLM, reference_wav: bytes
) -> None:
    """4096 characters of numbers (allowed) read out as 20,474 in spoken mode: past MAX_SPOKEN_CHARS."""
    numbers = "1." * 2048
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        speech = await client.post(SPEECH, json=body(input=numbers, mode="spoken"))
        files = {"reference_audio": ("a.wav", reference_wav)}
        vc = await client.post(VC, data=_vc_fields(generate_text=numbers, mode="spoken"), files=files)
        plain = await client.post(SPEECH, json=body(input=numbers, mode="rule", stream=False))
    for refused, param in ((speech, "input"), (vc, "generate_text")):
        error = assert_openai_error(refused, 400, param)
        assert error["code"] == "spoken_text_too_long" and "MAX_SPOKEN_CHARS" in str(error["message"])
    assert plain.status_code == 200, "the same text unexpanded is spoken"
    assert all("one point" not in request.body["prompt"] for request in fake_vllm.requests)


@pytest.mark.parametrize(("path", "param"), [(VOICES, "audio_sample"), (VC, "reference_audio")])
async def test_a_moss_encoder_refusal_names_the_field_of_the_route(
    monkeypatch: pytest.MonkeyPatch,
    tiny_codec_dir: Path,
    tiny_moss_codec_dir: Path,
    fake_vllm: FakeVLLM,
    tmp_path: Path,
    reference_wav: bytes,
    path: str,
    param: str,
) -> None:
    settings = moss_settings(
        tiny_codec_dir, tiny_moss_codec_dir, fake_vllm.url, tmp_path, MODEL_FAMILIES=["moss"]
    )
    async with (
        asynccontextmanager(serve_moss)(monkeypatch, settings) as served,
        httpx.AsyncClient(base_url=served.url, timeout=30) as client,
    ):
        assert served.family.codec is not None

        async def refuse(audio: object) -> object:
            raise ValueError("the encoder cannot take this clip")

        monkeypatch.setattr(served.family.codec, "encode", refuse)
        if path == VOICES:
            refused = await register(client, "abc", reference_wav)
        else:
            fields = {"generate_text": "Say this.", "model": "moss-tts-realtime"}
            refused = await client.post(VC, data=fields, files={"reference_audio": ("a.wav", reference_wav)})
    error = assert_openai_error(refused, 400, param)
    assert (
        str(error["message"]).startswith(f"{param}: ") and "reference_audio" not in str(error["message"])[1:]
    )


def _raw_multipart(fields: list[tuple[str, bytes]], audio: bytes, file_field: str) -> tuple[bytes, str]:
    boundary = "carelessboundary"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode() + value + b"\r\n"
        for name, value in fields
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; filename="a.wav"\r\n'
        "Content-Type: audio/wav\r\n\r\n".encode()
        + audio
        + b"\r\n"
    )
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


@pytest.mark.parametrize(
    ("path", "fields", "param"),
    [
        (
            VC,
            [("reference_text", REFERENCE_TEXT.encode()), ("generate_text", b"Caf\xe9 au lait.")],
            "generate_text",
        ),
        (
            VC,
            [("reference_text", b"Hello \xff\xfe there"), ("generate_text", b"Say this.")],
            "reference_text",
        ),
        (VOICES, [("name", b"latin"), ("reference_text", b"S\xe3o Paulo is far.")], "reference_text"),
    ],
)
async def test_form_fields_that_are_not_utf8_are_400_naming_the_field(
    url: str,
    fake_vllm: FakeVLLM,
    reference_wav: bytes,
    path: str,
    fields: list[tuple[str, bytes]],
    param: str,
) -> None:
    file_field = "audio_sample" if path == VOICES else "reference_audio"
    content, content_type = _raw_multipart(fields, reference_wav, file_field)
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        refused = await client.post(path, content=content, headers={"content-type": content_type})
        utf8 = [(name, value.decode("latin-1").encode()) for name, value in fields]  # the same text as UTF-8
        content, content_type = _raw_multipart(utf8, reference_wav, file_field)
        accepted = await client.post(path, content=content, headers={"content-type": content_type})
    assert assert_openai_error(refused, 400, param)["code"] == "invalid_encoding"
    assert accepted.status_code == (201 if path == VOICES else 200), accepted.text
    assert len(fake_vllm.requests) == (1 if path == VC else 0)


# --- uploads that would decode to huge memory ---------------------------------------------------------


def _declaring(channels: int, rate: int, seconds: float, fmt: str, subtype: str) -> bytes:
    out = io.BytesIO()
    sf.write(out, np.zeros((int(rate * seconds), channels), np.float32), rate, format=fmt, subtype=subtype)
    return out.getvalue()


@pytest.mark.parametrize(
    "upload",
    [
        pytest.param(lambda: _declaring(8, 655_350, 2.0, "FLAC", "PCM_16"), id="flac_8ch_655khz"),
        pytest.param(lambda: _declaring(255, 8000, 1.2, "OGG", "VORBIS"), id="vorbis_255ch"),
    ],
)
async def test_small_uploads_declaring_huge_audio_are_400_at_once(
    url: str, fake_vllm: FakeVLLM, upload: object
) -> None:
    data = upload()  # type: ignore[operator]
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        started = time.perf_counter()
        registered = await register(client, "huge", data)
        files = {"reference_audio": ("a.flac", data)}
        vc = await client.post(VC, data=_vc_fields(), files=files)
        elapsed = time.perf_counter() - started
        names = [v["name"] for v in (await client.get(VOICES)).json()["voices"] if v["type"] == "registered"]
    assert assert_openai_error(registered, 400, "audio_sample")["code"] == "invalid_audio"
    assert assert_openai_error(vc, 400, "reference_audio")["code"] == "invalid_audio"
    assert elapsed < 2.0 and names == [] and fake_vllm.requests == []


async def test_a_registration_decodes_the_clip_once_for_every_family(
    monkeypatch: pytest.MonkeyPatch,
    tiny_codec_dir: Path,
    tiny_moss_codec_dir: Path,
    fake_vllm: FakeVLLM,
    tmp_path: Path,
    reference_wav: bytes,
) -> None:
    decodes = []
    real_sniff = audio_io.sniff

    def counting_sniff(data: bytes) -> object:
        decodes.append(len(data))
        return real_sniff(data)

    monkeypatch.setattr(audio_io, "sniff", counting_sniff)
    settings = moss_settings(tiny_codec_dir, tiny_moss_codec_dir, fake_vllm.url, tmp_path)  # both families
    async with (
        asynccontextmanager(serve_moss)(monkeypatch, settings) as served,
        httpx.AsyncClient(base_url=served.url, timeout=30) as client,
    ):
        registered = await register(client, "both", reference_wav)
        assert registered.status_code == 201, registered.text
        speech = await client.post(
            SPEECH, json={"model": "moss-tts-realtime", "input": "one", "voice": "both"}
        )
    assert speech.status_code == 200
    assert decodes == [len(reference_wav)], "one decode, to 16 and 24 kHz at once"
