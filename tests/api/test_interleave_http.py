"""Interleaved generation end to end: the real app + tiny NeuCodec + the fake vLLM (or a scripted LM)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from app.config import Settings
from app.core.types import FinishReason
from app.families.neucodec.lm.types import GenerationParams
from app.families.neucodec.prompt import estimate_tokens
from app.main import create_app
from app.synthesis.engine import Engine
from tests.api.conftest import http_settings, serve, serve_app
from tests.api.test_speech_http import assert_openai_error
from tests.fakes.fake_vllm import FakeVLLM, Script

SPEECH = "/v1/audio/speech"
INTERLEAVE = "/v1/audio/interleave/"
FAKE_CODES = "".join(f"<|s_{code}|>" for code in range(1000, 1048))  # the fake's default 48 codes


def body(text: str, **fields: object) -> dict[str, object]:
    return {"input": text, "voice": "husein"} | fields


def interleave_settings(codec: Path, lm_url: str, store_dir: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {"INTERLEAVE_STORE": "shm", "INTERLEAVE_STORE_DIR": str(store_dir)}
    return http_settings(codec, lm_url, **(values | overrides))


@pytest.fixture
async def url(tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path) -> AsyncIterator[str]:
    async with serve(interleave_settings(tiny_codec_dir, fake_vllm.url, tmp_path / "turns")) as base:
        yield base


async def speak(
    base: str, payload: dict[str, object], headers: dict[str, str] | None = None
) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(base + SPEECH, json=payload, headers=headers)


async def inspect(base: str, interleave_id: str, method: str = "GET") -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.request(method, base + INTERLEAVE + quote(interleave_id, safe=""))


def turn_prompt(text: str, codes: str = FAKE_CODES) -> str:
    return f"<|im_start|>husein: {text}<|speech_start|>{codes}<|im_end|>"


def new_turn(text: str) -> str:
    return f"<|im_start|>husein: {text}<|speech_start|>"


async def test_livekit_pattern_three_sentences_then_delete(url: str, fake_vllm: FakeVLLM) -> None:
    sentences = ["Hello my name is husein,", "I like to eat chicken rice.", "What about you?"]
    room = {"X-Interleave-Id": "room-42"}  # how LiveKit's openai.TTS passes it: a default header
    for turns, text in enumerate(sentences):
        response = await speak(url, body(text, response_format="pcm"), headers=room)
        assert response.status_code == 200
        assert len(response.content) == 48 * 480 * 2, "history is prefill only: the audio is this turn's"
        assert response.headers["x-interleave-id"] == "room-42"
        assert response.headers["x-interleave-turns"] == str(turns)
        assert response.headers["x-interleave-tokens"] == str(48 * turns)
    prompts = [request.body["prompt"] for request in fake_vllm.requests]
    assert prompts == [
        new_turn(sentences[0]),
        turn_prompt(sentences[0]) + new_turn(sentences[1]),
        turn_prompt(sentences[0]) + turn_prompt(sentences[1]) + new_turn(sentences[2]),
    ]

    info = (await inspect(url, "room-42")).json()
    assert [(t["voice"], t["text"], t["tokens"], t["seconds"]) for t in info["turns"]] == [
        ("husein", text, 48, 0.96) for text in sentences
    ]
    assert info["interleave_id"] == "room-42" and info["store"] == "shm"
    assert info["total_tokens"] == 144
    assert 590 < info["expires_in_s"] <= 600
    assert (info["ttl_s"], info["max_retain_interleave"], info["max_s"]) == (600, 5, 20)
    assert (info["max_model_len"], info["min_gen_tokens"]) == (4096, 1000)

    deleted = await inspect(url, "room-42", "DELETE")
    assert deleted.status_code == 200
    assert deleted.json() == {"interleave_id": "room-42", "deleted": True}
    assert (await inspect(url, "room-42", "DELETE")).json()["deleted"] is False
    assert (await inspect(url, "room-42")).json()["turns"] == []
    response = await speak(url, body("Starting over."), headers=room)
    assert response.headers["x-interleave-turns"] == "0"
    assert fake_vllm.requests[-1].body["prompt"] == new_turn("Starting over.")


async def test_the_body_id_wins_and_odd_ids_round_trip(url: str, fake_vllm: FakeVLLM) -> None:
    odd = "房间/../42 ✓"
    response = await speak(url, body("One.", interleave_id=odd), headers={"X-Interleave-Id": "header-id"})
    assert response.headers["x-interleave-id"] == quote(odd, safe="")
    assert [t["text"] for t in (await inspect(url, odd)).json()["turns"]] == ["One."]
    assert (await inspect(url, odd)).json()["interleave_id"] == odd
    assert (await inspect(url, "header-id")).json()["turns"] == []
    utf8_header = {"X-Interleave-Id": "salle-été".encode()}  # raw UTF-8 bytes in the header
    response = await speak(url, body("Two."), headers=utf8_header)
    assert response.headers["x-interleave-id"] == quote("salle-été", safe="")
    assert [t["text"] for t in (await inspect(url, "salle-été")).json()["turns"]] == ["Two."]


async def test_buffered_and_sse_responses_take_part(url: str, fake_vllm: FakeVLLM) -> None:
    buffered = await speak(url, body("One.", interleave_id="mixed", stream=False, response_format="wav"))
    assert buffered.status_code == 200 and buffered.headers["x-interleave-turns"] == "0"
    sse = await speak(url, body("Two.", interleave_id="mixed", stream_format="sse"))
    assert sse.status_code == 200 and sse.headers["content-type"].startswith("text/event-stream")
    assert sse.headers["x-interleave-turns"] == "1" and sse.headers["x-interleave-tokens"] == "48"
    assert "speech.audio.done" in sse.text
    assert len((await inspect(url, "mixed")).json()["turns"]) == 2


async def test_per_request_turn_limit(url: str, fake_vllm: FakeVLLM) -> None:
    for text in ["One.", "Two.", "Three."]:
        await speak(url, body(text, interleave_id="limited"))
    response = await speak(url, body("Four.", interleave_id="limited", max_retain_interleave=1))
    assert response.headers["x-interleave-turns"] == "1"
    assert fake_vllm.requests[-1].body["prompt"] == turn_prompt("Three.") + new_turn("Four.")
    # the committing request's limit is what the store keeps
    assert [t["text"] for t in (await inspect(url, "limited")).json()["turns"]] == ["Four."]


@pytest.mark.parametrize(
    ("payload", "headers", "param"),
    [
        (body("Hi.", interleave_id="x" * 257), None, "interleave_id"),
        (body("Hi."), {"X-Interleave-Id": "x" * 257}, "X-Interleave-Id"),
        (body("Hi.", max_retain_interleave=65), None, "max_retain_interleave"),
        (body("Hi.", max_retain_interleave=-1), None, "max_retain_interleave"),
        (body("Hi.", interleave_id=42), None, "interleave_id"),
    ],
)
async def test_bad_interleave_fields_are_rejected_before_any_audio(
    url: str, fake_vllm: FakeVLLM, payload: dict[str, object], headers: dict[str, str] | None, param: str
) -> None:
    assert_openai_error(await speak(url, payload, headers=headers), 422, param)
    assert fake_vllm.requests == []


async def test_a_cut_or_abandoned_generation_is_not_a_turn(url: str, fake_vllm: FakeVLLM) -> None:
    cut = await speak(url, body("Cut short.", interleave_id="room", max_tokens=48))  # 48 codes: "length"
    assert cut.status_code == 200
    assert (await inspect(url, "room")).json()["turns"] == []

    fake_vllm.script = Script(codes=list(range(2000)), tokens_per_event=5, tokens_per_s=200)
    async with (
        httpx.AsyncClient(timeout=10) as client,
        client.stream("POST", url + SPEECH, json=body("Hang up.", interleave_id="room")) as response,
    ):
        assert response.status_code == 200
        async for _chunk in response.aiter_raw():
            break  # the first audio arrived: hang up
    await fake_vllm.wait_disconnected(timeout=1.0)
    await asyncio.sleep(0.1)
    assert (await inspect(url, "room")).json()["turns"] == []


async def test_history_fits_the_lm_window_and_max_tokens_is_clamped(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path
) -> None:
    settings = interleave_settings(
        tiny_codec_dir, fake_vllm.url, tmp_path, LM_MAX_MODEL_LEN=400, INTERLEAVE_MIN_GEN_TOKENS=350
    )
    async with serve(settings) as base:
        await speak(base, body("Hello one.", interleave_id="tight"))
        response = await speak(base, body("Hello two.", interleave_id="tight"))
    sent = fake_vllm.requests[-1].body
    # 50 tokens of prompt at most (estimated: no local tokenizer): the turn is cut to its last codes
    assert 0 < int(response.headers["x-interleave-tokens"]) < 48
    assert estimate_tokens(sent["prompt"]) <= 50
    assert sent["prompt"].endswith("<|s_1047|><|im_end|>" + new_turn("Hello two."))
    assert sent["max_tokens"] == 400 - estimate_tokens(sent["prompt"])
    assert fake_vllm.requests[0].body["max_tokens"] == 400 - estimate_tokens(new_turn("Hello one."))


async def test_store_off_ignores_ids_and_the_endpoints_say_400(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM
) -> None:
    settings = http_settings(tiny_codec_dir, fake_vllm.url, INTERLEAVE_STORE="off")
    async with serve(settings) as base:
        for _ in range(2):
            response = await speak(base, body("Hello.", interleave_id="room"))
            assert response.status_code == 200
            assert "x-interleave-turns" not in response.headers
        assert_openai_error(await inspect(base, "room"), 400)
        error = assert_openai_error(await inspect(base, "room", "DELETE"), 400)
        assert error["code"] == "interleave_disabled"
    assert [r.body["prompt"] for r in fake_vllm.requests] == [new_turn("Hello.")] * 2


# --- fallback: an LM that derails on history -------------------------------------------------------


class ScriptedStream:
    """A TokenStream yielding ``codes`` one at a time, ``delay_s`` apart, then finishing ``stop``."""

    def __init__(self, codes: list[int], delay_s: float) -> None:
        self.finish_reason: FinishReason | None = None
        self.prompt_tokens: int | None = None
        self._codes = iter(codes)
        self._delay_s = delay_s

    def __aiter__(self) -> ScriptedStream:
        return self

    async def __anext__(self) -> list[int]:
        await asyncio.sleep(self._delay_s)
        code = next(self._codes, None)
        if code is None:
            self.finish_reason = self.finish_reason or "stop"
            raise StopAsyncIteration
        return [code]

    async def aclose(self) -> None:
        self.finish_reason = self.finish_reason or "cancelled"


class HistoryShyLM:
    """A TokenSource that stops after 3 codes when the prompt holds history, else speaks 60 codes."""

    name = "scripted"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def ready(self) -> bool:
        return True

    def generate(self, params: GenerationParams) -> ScriptedStream:
        self.prompts.append(params.prompt)
        with_history = "<|im_end|>" in params.prompt
        if with_history:  # paced, so that a 1-code window is decoded before the LM stops
            return ScriptedStream([7, 8, 9], delay_s=0.02)
        return ScriptedStream(list(range(100, 160)), delay_s=0.001)


@pytest.fixture
def scripted_lm() -> HistoryShyLM:
    return HistoryShyLM()


def serve_with(settings: Settings, lm: HistoryShyLM) -> AbstractAsyncContextManager[str]:
    """The app with ``lm`` as the default family's token source, injected through ``create_app``."""
    engine = Engine.from_settings(settings)
    engine.default.source = lm  # the NeuCodec family's LM, swapped before start
    return serve_app(create_app(settings, engine=engine))


@pytest.mark.parametrize("stream", [True, False])
async def test_an_early_stop_with_history_regenerates_cold_before_any_audio(
    tiny_codec_dir: Path, scripted_lm: HistoryShyLM, tmp_path: Path, stream: bool
) -> None:
    # 1-code windows without future context: without the hold-back, the derailed turn's first code
    # would be decoded and sent at once
    settings = interleave_settings(
        tiny_codec_dir,
        "http://127.0.0.1:9",
        tmp_path,
        DEFAULT_PLAYBACK_SPEED=0.02,
        DEFAULT_PLAYBACK_OVERLAP_SPEED=0,
        STREAM_CHUNK_GROWTH=1,
    )
    text = "one two three four five"
    async with serve_with(settings, scripted_lm) as base:
        await speak(base, body("Before.", interleave_id="room"))
        response = await speak(base, body(text, interleave_id="room", stream=stream, response_format="pcm"))
        turns = (await inspect(base, "room")).json()["turns"]
    assert response.status_code == 200
    assert len(response.content) == 60 * 480 * 2, "only the cold regeneration is heard"
    assert response.headers["x-interleave-turns"] == "0"
    assert scripted_lm.prompts == [
        new_turn("Before."),
        turn_prompt("Before.", "".join(f"<|s_{c}|>" for c in range(100, 160))) + new_turn(text),
        new_turn(text),
    ]
    assert [(t["text"], t["tokens"]) for t in turns] == [("Before.", 60), (text, 60)]


async def test_without_fallback_the_short_turn_stands(
    tiny_codec_dir: Path, scripted_lm: HistoryShyLM, tmp_path: Path
) -> None:
    settings = interleave_settings(tiny_codec_dir, "http://127.0.0.1:9", tmp_path, INTERLEAVE_FALLBACK=False)
    async with serve_with(settings, scripted_lm) as base:
        await speak(base, body("Before.", interleave_id="room"))
        response = await speak(base, body("one two three four five", interleave_id="room"))
        turns = (await inspect(base, "room")).json()["turns"]
    assert len(response.content) == 3 * 480 * 2
    assert response.headers["x-interleave-turns"] == "1"
    assert len(scripted_lm.prompts) == 2
    assert [t["tokens"] for t in turns] == [60, 3]


async def test_with_api_keys_each_key_has_its_own_interleave_ids(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path
) -> None:
    """A guessable id (a room name) written with one key is invisible to another: it cannot be read,
    continued or deleted with a different key."""
    settings = interleave_settings(tiny_codec_dir, fake_vllm.url, tmp_path / "turns", API_KEYS="key-a,key-b")
    a, b = ({"Authorization": f"Bearer {key}"} for key in ("key-a", "key-b"))

    async def request(base: str, method: str, headers: dict[str, str]) -> httpx.Response:
        async with httpx.AsyncClient(timeout=10) as client:
            return await client.request(method, base + INTERLEAVE + "room", headers=headers)

    async with serve(settings) as base:
        first = await speak(base, body("Hello there.", interleave_id="room"), headers=a)
        await speak(base, body("Hi.", interleave_id="room"), headers=b)  # B's own conversation "room"
        seen_by_b = (await request(base, "GET", b)).json()["turns"]
        deleted_by_b = (await request(base, "DELETE", b)).json()["deleted"]
        seen_by_a = (await request(base, "GET", a)).json()["turns"]
    assert first.status_code == 200 and first.headers["x-interleave-id"] == "room"  # the client's id
    assert [turn["text"] for turn in seen_by_b] == ["Hi."]
    assert deleted_by_b is True  # B's own history, not A's
    assert [turn["text"] for turn in seen_by_a] == ["Hello there."]
    prompts = [request.body["prompt"] for request in fake_vllm.requests]
    assert "Hello there." not in prompts[1]  # B's turn was not prompted with A's history
