"""Hostile requests end to end, against the app served with ``python -m app``'s options:
uploads that are playlists or session files, stalled headers and bodies, huge JSON, early multipart
refusals, HEAD probes, input with nothing speakable."""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import numpy as np
import pytest

from app.__main__ import connection_limits, server_options
from app.api.connection import connection_protocol
from app.audio import decoder_pool
from app.audio.io import ReferenceAudio
from app.config import Settings
from app.core.errors import Unavailable
from app.families.neucodec.prompt import estimate_tokens
from app.main import create_app
from tests.api.conftest import REFERENCE_TEXT, http_settings, serve_app
from tests.api.test_speech_http import assert_openai_error, body
from tests.fakes.fake_vllm import FakeVLLM, Script
from tests.speech_audio import wav_bytes

SPEECH, VC, VOICES = "/v1/audio/speech", "/v1/audio/vc", "/v1/audio/voices"
SDP = (
    b"v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=voice\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
    b"m=audio 5004 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
)
CONCAT = b"ffconcat version 1.0\nfile private_recording.wav\n"
HTTP_IMPLEMENTATIONS = ["httptools", "h11"]


def sdp_on_a_free_port() -> bytes:
    """SDP of an RTP session on a UDP port free now (each hostile upload its own, or they collide)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return SDP.replace(b"5004", str(port).encode())


def serve_as_main(settings: Settings, http: str = "auto") -> AbstractAsyncContextManager[str]:
    """``create_app(settings)`` under uvicorn with the options ``python -m app`` uses, on a free port
    (``http``: the HTTP/1.1 implementation under the header timeout, ``auto`` as in production)."""
    options = server_options(settings) | {"host": "127.0.0.1", "port": 0, "log_level": "warning"}
    if http != "auto":
        options["http"] = connection_protocol(connection_limits(settings), http)
    return serve_app(create_app(settings), **options)


def settings_for(codec_dir: Path, fake: FakeVLLM, tmp_path: Path, **overrides: object) -> Settings:
    return http_settings(codec_dir, fake.url, VOICES_DIR=str(tmp_path / "voices"), **overrides)


@pytest.fixture
async def url(tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path) -> AsyncIterator[str]:
    async with serve_as_main(settings_for(tiny_codec_dir, fake_vllm, tmp_path)) as base:
        yield base


async def upload(client: httpx.AsyncClient, path: str, data: bytes, name: str = "voice_a") -> httpx.Response:
    """``data`` as the audio of a registration or a voice conversion (an innocent file name)."""
    if path == VOICES:
        fields = {"name": name, "reference_text": REFERENCE_TEXT}
        return await client.post(path, data=fields, files={"audio_sample": ("a.wav", data)})
    fields = {"reference_text": REFERENCE_TEXT, "generate_text": "Say this."}
    return await client.post(path, data=fields, files={"reference_audio": ("a.wav", data)})


async def first_audio_s(client: httpx.AsyncClient) -> float:
    """Seconds from sending a streamed speech request to its first audio byte."""
    started = time.perf_counter()
    elapsed = None
    async with client.stream("POST", SPEECH, json=body(response_format="pcm")) as response:
        assert response.status_code == 200
        async for chunk in response.aiter_raw():
            if chunk and elapsed is None:
                elapsed = time.perf_counter() - started
    assert elapsed is not None, "no audio"
    return elapsed


async def exchange(base: str, request: bytes, wait_s: float) -> bytes:
    """Send ``request`` on a raw connection, then read until the server closes it (or ``wait_s``)."""
    parts = urlsplit(base)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(request)
    await writer.drain()
    chunks = []
    try:
        async with asyncio.timeout(wait_s):
            while chunk := await reader.read(65536):
                chunks.append(chunk)
    except TimeoutError:
        pass
    finally:
        writer.close()
    return b"".join(chunks)


# --- uploads ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [VOICES, VC])
async def test_sdp_and_ffconcat_uploads_are_refused_at_once(
    url: str, path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_vllm: FakeVLLM
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "private_recording.wav").write_bytes(wav_bytes(np.full(32000, 0.1), 16000))
    param = "audio_sample" if path == VOICES else "reference_audio"
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        for data in (SDP, CONCAT):
            started = time.perf_counter()
            response = await upload(client, path, data)
            assert time.perf_counter() - started < 2.0
            assert assert_openai_error(response, 400, param)["code"] == "invalid_audio"
        assert (await client.get(VOICES)).json()["voices"][-1]["type"] == "builtin"
    assert fake_vllm.requests == []


async def test_six_hostile_uploads_leave_a_concurrent_stream_on_time(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        await first_audio_s(client)  # warm-up
        baseline = statistics.median([await first_audio_s(client) for _ in range(3)])
        uploads = [
            asyncio.create_task(upload(client, VOICES if i % 2 else VC, sdp_on_a_free_port(), name=f"v{i}"))
            for i in range(6)
        ]
        await asyncio.sleep(0.2)
        during = await first_audio_s(client)
        answers = await asyncio.gather(*uploads)
    assert [a.status_code for a in answers] == [400] * 6
    timing = (
        f"first audio alone {baseline * 1e3:.0f} ms (median of 3); with 6 SDP uploads {during * 1e3:.0f} ms"
    )
    print(timing)
    assert during < 3 * baseline + 1.0, timing


async def test_uploads_that_hold_their_decoder_do_not_delay_streams(
    url: str, reference_wav: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six uploads whose decode blocks its thread for 3 s: streams never wait on those threads."""

    def slow_decode(data: bytes, **kwargs: object) -> dict[int, ReferenceAudio]:
        time.sleep(3.0)
        raise Unavailable("slow")

    monkeypatch.setattr(decoder_pool, "load_references", slow_decode)
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        await first_audio_s(client)
        baseline = statistics.median([await first_audio_s(client) for _ in range(3)])
        uploads = [asyncio.create_task(upload(client, VC, reference_wav)) for _ in range(6)]
        await asyncio.sleep(0.3)
        during = [await first_audio_s(client) for _ in range(3)]
        answers = await asyncio.gather(*uploads)
    assert {a.status_code for a in answers} == {503}
    assert max(during) < 3 * baseline + 1.0, (baseline, during)


async def test_voice_registration_counts_against_admission(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path, reference_wav: bytes
) -> None:
    fake_vllm.script = Script(codes=list(range(1000, 1048)), first_token_delay_s=1.5)
    settings = settings_for(
        tiny_codec_dir, fake_vllm, tmp_path, MAX_CONCURRENT_STREAMS=1, MAX_QUEUED_STREAMS=0
    )
    async with serve_as_main(settings) as base, httpx.AsyncClient(base_url=base, timeout=30) as client:
        speaking = asyncio.create_task(client.post(SPEECH, json=body(stream=False)))
        await asyncio.sleep(0.3)
        refused = await upload(client, VOICES, reference_wav)
        assert assert_openai_error(refused, 429)["code"] == "rate_limit_exceeded"
        assert (await speaking).status_code == 200
        assert (await upload(client, VOICES, reference_wav)).status_code == 201


# --- timeouts and caps at the edge -----------------------------------------------------------------


async def test_a_stalled_body_gets_408_and_frees_its_stream_slot(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path
) -> None:
    settings = settings_for(
        tiny_codec_dir,
        fake_vllm,
        tmp_path,
        MAX_CONCURRENT_STREAMS=1,
        MAX_QUEUED_STREAMS=0,
        BODY_READ_TIMEOUT_S=0.5,
    )
    async with serve_as_main(settings) as base:
        stalled = f"POST {SPEECH} HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n".encode() + b'{"input":'
        answer = asyncio.create_task(exchange(base, stalled, wait_s=5.0))
        await asyncio.sleep(0.2)
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            busy = await client.post(SPEECH, json=body(stream=False))
            assert busy.status_code == 429, "the stalled request holds the only slot"
            reply = await answer
            assert reply.startswith(b"HTTP/1.1 408 "), reply[:200]
            assert b'"code":"request_timeout"' in reply and b"connection: close" in reply.lower()
            assert (await client.post(SPEECH, json=body(stream=False))).status_code == 200


@pytest.mark.parametrize("http", HTTP_IMPLEMENTATIONS)
async def test_stalled_headers_get_408_and_the_connection_closes(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path, http: str
) -> None:
    settings = settings_for(tiny_codec_dir, fake_vllm, tmp_path, HEADER_READ_TIMEOUT_S=0.5)
    async with serve_as_main(settings, http) as base:
        started = time.perf_counter()
        reply = await exchange(base, f"POST {SPEECH} HTTP/1.1\r\nhost: x\r\ncontent-".encode(), wait_s=5.0)
        assert reply.startswith(b"HTTP/1.1 408 ") and b'"code": "request_timeout"' in reply
        assert time.perf_counter() - started < 2.0, "closed by the header timeout, not the test's"
        silent = await exchange(base, b"", wait_s=5.0)
        assert silent == b"" and time.perf_counter() - started < 3.0, "an idle new connection is closed"
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:  # keep-alive reuse still works
            for _ in range(2):
                assert (await client.get("/health")).status_code == 200
                await asyncio.sleep(0.7)
            assert (await client.post(SPEECH, json=body(stream=False))).status_code == 200


async def test_json_bodies_over_the_cap_are_413_before_being_read(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path
) -> None:
    settings = settings_for(tiny_codec_dir, fake_vllm, tmp_path, MAX_JSON_BODY_BYTES=4096)
    padded = body(padding="x" * 100_000)
    async with serve_as_main(settings) as base, httpx.AsyncClient(base_url=base, timeout=10) as client:
        declared = await client.post(SPEECH, json=padded)
        assert assert_openai_error(declared, 413)["code"] == "payload_too_large"

        async def chunks() -> AsyncIterator[bytes]:
            data = httpx.Request("POST", base, json=padded).content
            for start in range(0, len(data), 1000):
                yield data[start : start + 1000]

        chunked = await client.post(SPEECH, content=chunks(), headers={"content-type": "application/json"})
        assert assert_openai_error(chunked, 413)["code"] == "payload_too_large"
        assert (await client.post(SPEECH, json=body(padding="x" * 1000, stream=False))).status_code == 200
    assert len(fake_vllm.requests) == 1


@pytest.mark.parametrize("http", HTTP_IMPLEMENTATIONS)
async def test_a_413_reaches_a_client_that_writes_its_whole_body_first(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path, http: str
) -> None:
    """The cap answers from the header alone; the body is drained first so the answer is not reset."""
    settings = settings_for(tiny_codec_dir, fake_vllm, tmp_path, MAX_JSON_BODY_BYTES=4096)
    huge = b'{"input": "hi", "padding": "' + b"x" * 16_000_000 + b'"}'
    async with serve_as_main(settings, http) as base:
        reply = await asyncio.to_thread(_write_all_then_read, base, SPEECH, huge, "application/json")
    assert reply.startswith(b"HTTP/1.1 413 ") and b'"code":"payload_too_large"' in reply, reply[:300]


def _multipart(fields: list[tuple[str, bytes]], boundary: str = "hostileboundary") -> bytes:
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode() + value + b"\r\n"
        for name, value in fields
    ]
    return b"".join(parts) + f"--{boundary}--\r\n".encode()


def _write_all_then_read(
    base: str, path: str, payload: bytes, content_type: str = "multipart/form-data; boundary=hostileboundary"
) -> bytes:
    """A client that writes its whole body before reading the answer (blocking socket)."""
    parts = urlsplit(base)
    head = (
        f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(payload)}\r\n\r\n"
    ).encode()
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=20) as sock:
        sock.sendall(head + payload)
        received = b""
        while b"\r\n\r\n" not in received or not received.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    return received


@pytest.mark.parametrize(
    "fields",
    [
        [("reference_text", b"hi")] * 1500 + [("padding", b"p" * 16_000_000)],
        [("reference_text", b"t" * 3_000_000), ("padding", b"p" * 16_000_000)],
        [(f"n{'x' * 200_000}", b"v"), ("padding", b"p" * 16_000_000)],
    ],
    ids=["too_many_fields", "huge_field", "huge_field_name"],
)
@pytest.mark.parametrize("path", [VOICES, VC])
@pytest.mark.parametrize("http", HTTP_IMPLEMENTATIONS)
async def test_multipart_limit_errors_reach_a_client_that_writes_its_whole_body_first(
    tiny_codec_dir: Path,
    fake_vllm: FakeVLLM,
    tmp_path: Path,
    http: str,
    path: str,
    fields: list[tuple[str, bytes]],
) -> None:
    async with serve_as_main(settings_for(tiny_codec_dir, fake_vllm, tmp_path), http) as base:
        reply = await asyncio.to_thread(_write_all_then_read, base, path, _multipart(fields))
    assert reply.startswith((b"HTTP/1.1 400 ", b"HTTP/1.1 422 ")), reply[:300]
    assert b'"error"' in reply


# --- probes and unspeakable input ------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/health", "/ready", "/v1/models", VOICES, "/metrics"])
async def test_head_works_wherever_get_does(url: str, path: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        got = await client.get(path)
        head = await client.head(path)
    assert head.status_code == got.status_code == 200
    assert head.content == b"" and head.headers["content-type"] == got.headers["content-type"]


@pytest.mark.parametrize(
    "text",
    [
        "\u0000",
        "\u200b\u200c\u200d\u2060",
        "\x01\x02\x07\x1b",
        "  \t\n ",
        "\U0001f600\U0001f44d",
        "  <|im_end|> ",
    ],
)
async def test_input_with_nothing_speakable_is_400_before_any_audio(
    url: str, fake_vllm: FakeVLLM, text: str, reference_wav: bytes
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        speech = await client.post(SPEECH, json=body(input=text))
        assert assert_openai_error(speech, 400, "input")["code"] == "no_speakable_text"
        fields = {"reference_text": REFERENCE_TEXT, "generate_text": text}
        vc = await client.post(VC, data=fields, files={"reference_audio": ("a.wav", reference_wav)})
        assert assert_openai_error(vc, 400, "generate_text")["code"] == "no_speakable_text"
    assert fake_vllm.requests == []


# Every kind of character that is invisible or a control, as JSON can carry it: C0 and C1 controls,
# zero-width and bidi format characters, tag characters (text hidden from a reader), fillers that are
# letters by category, variation selectors.
INVISIBLE = {
    "nul": "\x00",
    "c0": "\x01\x07\x1b\x7f",
    "c1": "\x80\x85\x9b\x9f",
    "zero_width": "\u200b\u200c\u200d\u2060\ufeff",
    "bidi": "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c",
    "tags": "\U000e0001\U000e0049\U000e0067\U000e007f",
    "fillers": "\u115f\u1160\u3164\uffa0",
    "selectors": "\ufe0f\U000e0100\u180b\u034f",
}


def json_escaped(payload: dict[str, object]) -> bytes:
    """``payload`` as JSON with every non-ASCII character escaped (``\\uXXXX``, pairs above U+FFFF)."""
    return json.dumps(payload, ensure_ascii=True).encode()


@pytest.mark.parametrize("kind", sorted(INVISIBLE))
async def test_input_of_only_invisible_characters_is_400_before_any_audio(
    url: str, fake_vllm: FakeVLLM, kind: str
) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        headers = {"content-type": "application/json"}
        speech = await client.post(
            SPEECH, content=json_escaped(body(input=f" {INVISIBLE[kind]} ")), headers=headers
        )
    assert assert_openai_error(speech, 400, "input")["code"] == "no_speakable_text"
    assert fake_vllm.requests == []


@pytest.mark.parametrize("kind", sorted(INVISIBLE))
async def test_invisible_characters_inside_speakable_text_never_reach_the_lm(
    url: str, fake_vllm: FakeVLLM, kind: str, reference_wav: bytes
) -> None:
    """Between words they read as a space (controls) or nothing (format characters): the words stay,
    and the prompt holds none of them, on the speech and the voice-conversion paths."""
    chars = INVISIBLE[kind]
    text = f"Good{chars} morning{chars[0]} to you,{chars[-1]} friend{chars}."
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        headers = {"content-type": "application/json"}
        speech = await client.post(SPEECH, content=json_escaped(body(input=text)), headers=headers)
        fields = {"reference_text": f"{chars}{REFERENCE_TEXT}", "generate_text": text}
        vc = await client.post(VC, data=fields, files={"reference_audio": ("a.wav", reference_wav)})
    assert speech.status_code == vc.status_code == 200, speech.text + vc.text
    assert len(fake_vllm.requests) == 2
    for request in fake_vllm.requests:
        prompt = request.body["prompt"]
        assert isinstance(prompt, str)
        assert not set(prompt) & set(chars), ascii(prompt)
        assert "Good morning to you, friend." in prompt, ascii(prompt)


@pytest.mark.parametrize("text", ["\udc00", "\ud800", "Good \ud800 morning", "Good\udc00\ud800 morning."])
async def test_a_lone_surrogate_escape_is_refused_before_the_text_front_end(
    url: str, fake_vllm: FakeVLLM, text: str
) -> None:
    """JSON can escape half a surrogate pair; such a string is no Unicode text, refused with the
    schema errors (422, ``param: input``), alone or inside speakable text."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        headers = {"content-type": "application/json"}
        speech = await client.post(SPEECH, content=json_escaped(body(input=text)), headers=headers)
    assert assert_openai_error(speech, 422, "input")["code"] == "invalid_value"
    assert fake_vllm.requests == []


# --- client mistakes on every path are 4xx (item 5) ------------------------------------------------


async def test_max_tokens_fits_the_window_for_voice_conversion_and_registered_voices(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path, reference_wav: bytes
) -> None:
    """The reference's codes count against the window too: max_tokens is cut to what the VC prompt
    leaves, and a reference that leaves no room is a 400 naming ``reference_audio``, never a 502."""
    roomy = settings_for(
        tiny_codec_dir, fake_vllm, tmp_path, LM_MAX_MODEL_LEN=400, INTERLEAVE_MIN_GEN_TOKENS=100
    )
    async with serve_as_main(roomy) as base, httpx.AsyncClient(base_url=base, timeout=30) as client:
        fields = {"reference_text": REFERENCE_TEXT, "generate_text": "Say this.", "max_tokens": "30000"}
        vc = await client.post(VC, data=fields, files={"reference_audio": ("a.wav", reference_wav)})
        registered = await upload(client, VOICES, reference_wav, name="kept")
        speech = await client.post(SPEECH, json=body(input="Say this.", voice="kept", max_tokens=30000))
    assert registered.status_code == 201, registered.text
    assert vc.status_code == speech.status_code == 200, vc.text + speech.text
    assert len(fake_vllm.requests) == 2
    for request in fake_vllm.requests:
        prompt = request.body["prompt"]
        assert prompt.count("<|s_") == 139  # the reference clip's codes
        assert request.body["max_tokens"] == 400 - estimate_tokens(prompt)
    tight = settings_for(
        tiny_codec_dir, fake_vllm, tmp_path, LM_MAX_MODEL_LEN=180, INTERLEAVE_MIN_GEN_TOKENS=100
    )
    async with serve_as_main(tight) as base, httpx.AsyncClient(base_url=base, timeout=30) as client:
        vc = await client.post(VC, data=fields, files={"reference_audio": ("a.wav", reference_wav)})
        speech = await client.post(SPEECH, json=body(input="Say this.", voice="kept"))
    for refused in (vc, speech):
        assert assert_openai_error(refused, 400, "reference_audio")["code"] == "context_length_exceeded"
    assert len(fake_vllm.requests) == 2, "the backend is never asked"


async def test_a_spoken_mode_expansion_past_the_window_is_spoken_in_parts_that_fit(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path
) -> None:
    """``"1."`` 2048 times is 4096 characters (allowed) but thousands of prompt tokens once read out: a
    long input is spoken in parts, each prompt and its max_tokens within the LM window, so
    the backend never refuses one (no 502). (Its 20,474 spoken characters pass MAX_SPOKEN_CHARS' default,
    raised here.)"""
    settings = settings_for(tiny_codec_dir, fake_vllm, tmp_path, MAX_SPOKEN_CHARS=32768)
    async with serve_as_main(settings) as url, httpx.AsyncClient(base_url=url, timeout=60) as client:
        expanded = await client.post(SPEECH, json=body(input="1." * 2048, mode="spoken"))
    assert expanded.status_code == 200
    assert len(fake_vllm.requests) > 1
    for request in fake_vllm.requests:
        assert estimate_tokens(request.body["prompt"]) + request.body["max_tokens"] <= 4096
