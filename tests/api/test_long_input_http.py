"""Long inputs end to end (real app, tiny NeuCodec, fake vLLM): one response for every part, SSE usage
over all parts, a client that leaves stops the rest, interleave turns per part."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import httpx

from app.audio.splice import width_samples
from app.core.constants import SAMPLES_PER_TOKEN
from tests.api.conftest import http_settings, serve
from tests.api.test_interleave_http import inspect, interleave_settings, new_turn, turn_prompt
from tests.fakes.fake_vllm import FakeVLLM, Script, prompt_token_count

SPEECH = "/v1/audio/speech"
CROSSFADE = width_samples(20.0)  # LONG_INPUT_CROSSFADE_MS's default
TEXT = " ".join(
    f"Sentence number {word} is here, and it carries a few more words to say." for word in
    ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
)  # fmt: skip


def spoken(prompt: str) -> str:
    """The text of a prompt's new turn."""
    return prompt.rsplit("<|im_start|>husein: ", 1)[1].removesuffix("<|speech_start|>")


def body(**fields: object) -> dict[str, object]:
    return {"input": TEXT, "voice": "husein", "max_tokens": 400, "response_format": "pcm"} | fields


async def test_sse_usage_counts_every_part_and_the_audio_has_no_gap(
    app_url: str, fake_vllm: FakeVLLM
) -> None:
    async with httpx.AsyncClient(timeout=20) as client:
        response = await client.post(app_url + SPEECH, json=body(stream_format="sse"))
    assert response.status_code == 200
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    done = events[-1]
    assert done["type"] == "speech.audio.done"
    requests = [r.body for r in fake_vllm.requests]
    parts = len(requests)
    assert parts > 3  # 400 tokens (8 s) a generation: several parts
    assert " ".join(spoken(r["prompt"]) for r in requests) == TEXT
    codes = 48 * parts  # the fake's 48 codes per generation
    prompts = sum(prompt_token_count(r["prompt"]) for r in requests)
    assert done["usage"] == {"input_tokens": prompts, "output_tokens": codes, "total_tokens": prompts + codes}
    assert len(audio) == 2 * (codes * SAMPLES_PER_TOKEN - (parts - 1) * CROSSFADE)  # one crossfade a join


async def test_a_client_that_leaves_mid_way_stops_the_remaining_parts(
    app_url: str, fake_vllm: FakeVLLM
) -> None:
    fake_vllm.script = Script(codes=list(range(200)), tokens_per_event=5, tokens_per_s=200)  # 4 s in 1 s
    part_bytes = 200 * SAMPLES_PER_TOKEN * 2
    async with (
        httpx.AsyncClient(timeout=20) as client,
        client.stream("POST", app_url + SPEECH, json=body()) as response,
    ):
        assert response.status_code == 200
        received = 0
        async for chunk in response.aiter_raw():
            received += len(chunk)
            if received > 1.5 * part_bytes:
                break  # into the second part of about ten: hang up
    await fake_vllm.wait_disconnected(timeout=2.0)  # the generation going on is closed
    made = len(fake_vllm.requests)
    assert 2 <= made <= 3  # the part playing and at most the one generated ahead
    await asyncio.sleep(0.6)  # long enough for a next part to have been asked for, were it going on
    assert len(fake_vllm.requests) == made
    assert all(r.completed or r.disconnected.is_set() for r in fake_vllm.requests)


async def test_with_interleave_each_part_is_prompted_with_the_parts_before_it_as_turns(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path
) -> None:
    settings = interleave_settings(tiny_codec_dir, fake_vllm.url, tmp_path / "turns")
    async with serve(settings) as url:
        async with httpx.AsyncClient(timeout=20) as client:
            response = await client.post(url + SPEECH, json=body(interleave_id="room", max_tokens=300))
            assert response.status_code == 200
        stored = (await inspect(url, "room")).json()["turns"]
    texts = [spoken(r.body["prompt"]) for r in fake_vllm.requests]
    assert len(texts) > 3 and " ".join(texts) == TEXT
    keep = settings.MAX_RETAIN_INTERLEAVE
    for k, request in enumerate(fake_vllm.requests):
        history = "".join(turn_prompt(text) for text in texts[max(0, k - keep) : k])
        assert request.body["prompt"] == history + new_turn(texts[k])
    assert [turn["text"] for turn in stored] == texts[-keep:]  # each part is a turn, in order
    assert len(response.content) == 2 * (48 * len(texts) * SAMPLES_PER_TOKEN - (len(texts) - 1) * CROSSFADE)


async def test_the_crossfade_setting_sets_the_join_and_a_whole_body_holds_every_part(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM
) -> None:
    settings = http_settings(tiny_codec_dir, fake_vllm.url, LONG_INPUT_CROSSFADE_MS=0)
    async with serve(settings) as url, httpx.AsyncClient(timeout=20) as client:
        response = await client.post(url + SPEECH, json=body(stream=False))
    assert response.status_code == 200
    parts = len(fake_vllm.requests)
    assert parts > 3
    assert int(response.headers["content-length"]) == len(response.content)
    assert len(response.content) == 2 * 48 * SAMPLES_PER_TOKEN * parts  # butt joints: nothing overlaps
