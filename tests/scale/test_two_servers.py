"""Two server processes sharing one store see the same voices, turns and metrics.

With Redis (as replicas behind a load balancer would) and without it (the workers of one host sharing
VOICES_DIR and the shm turn store), every step goes through one server and is checked through the
other at once: no restart, no wait.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.api.conftest import REFERENCE_TEXT
from tests.api.test_speech_http import assert_openai_error
from tests.fakes.fake_vllm import FakeVLLM
from tests.scale.conftest import REDIS_URL, server_processes

VOICES = "/v1/audio/voices"
SPEECH = "/v1/audio/speech"
TEXTS = ["first sentence here.", "second one follows.", "third comes next.", "fourth and last."]


def base_settings(codec_dir: Path, fake: FakeVLLM, tmp_path: Path) -> dict[str, str]:
    return {
        "LM_BACKEND": "http",
        "TTS_API": fake.url,
        "CODEC_MODEL": str(codec_dir),
        "DEVICE": "cpu",
        "CODEC_THREADS": "1",
        "LM_CONNECT_TIMEOUT_S": "2",
        "LM_FIRST_TOKEN_TIMEOUT_S": "5",
        "LM_TOKEN_TIMEOUT_S": "5",
        "DEFAULT_PLAYBACK_SPEED": "0.4",
        "CODEC_BUCKETS": "16,24,32,48,64",
        "MAX_REGISTERED_VOICES": "2",
        "LOG_FORMAT": "text",
        "LOG_LEVEL": "warning",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


async def register(client: httpx.AsyncClient, url: str, name: str, audio: bytes) -> httpx.Response:
    data = {"name": name, "reference_text": REFERENCE_TEXT}
    return await client.post(url + VOICES, data=data, files={"audio_sample": ("sample.wav", audio)})


async def voice_names(client: httpx.AsyncClient, url: str) -> list[str]:
    listed = await client.get(url + VOICES)
    assert listed.status_code == 200, listed.text
    return [voice["name"] for voice in listed.json()["voices"] if voice["type"] == "registered"]


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the exposition ``text`` (0 when absent)."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


async def settled_metrics(
    client: httpx.AsyncClient, url: str, requests: int, labels: dict[str, str], within_s: float = 5.0
) -> str:
    """The exposition of ``url`` once it counts ``requests`` requests with ``labels`` (or after
    ``within_s``, whatever it then says)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        text = (await client.get(url + "/metrics")).text
        counted = metric(text, "tts_http_requests_total", **labels)
        if counted >= requests or asyncio.get_running_loop().time() > deadline:
            return text
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("store", ["redis", "file"])
async def test_two_servers_share_voices_turns_and_metrics(
    store: str,
    tiny_codec_dir: Path,
    fake_vllm: FakeVLLM,
    reference_wav: bytes,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    settings = base_settings(tiny_codec_dir, fake_vllm, tmp_path)
    if store == "redis":
        prefix = request.getfixturevalue("redis_prefix")
        settings |= {"VOICE_STORE": "redis", "INTERLEAVE_STORE": "redis", "REDIS_URL": REDIS_URL}
        settings |= {"REDIS_KEY_PREFIX": prefix, "VOICES_DIR": str(tmp_path / "unused-voices")}
    else:
        settings |= {"VOICE_STORE": "file", "VOICES_DIR": str(tmp_path / "voices")}
        settings |= {"INTERLEAVE_STORE": "shm", "INTERLEAVE_STORE_DIR": str(tmp_path / "turns")}
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    speeches = {0: 0, 1: 0}  # successful speech requests per server

    servers = server_processes(settings, tmp_path, ["a", "b"], metrics_dir)
    async with servers as (a, b), httpx.AsyncClient(timeout=60) as client:

        async def speak(server: int, voice: str, text: str = "Say this.", **extra: object) -> httpx.Response:
            url = (a, b)[server].url
            response = await client.post(url + SPEECH, json={"input": text, "voice": voice, **extra})
            speeches[server] += response.status_code == 200
            return response

        # a voice registered through A speaks through B at once
        created = await register(client, a.url, "shared_1", reference_wav)
        assert created.status_code == 201, created.text
        assert await voice_names(client, b.url) == ["shared_1"]
        spoken = await speak(1, "shared_1")
        assert spoken.status_code == 200, spoken.text
        assert (
            fake_vllm.requests[-1].body["prompt"].startswith(f"<|im_start|>{REFERENCE_TEXT}<|speech_start|>")
        )

        # deleted on B, it is gone on A
        deleted = await client.delete(b.url + VOICES + "/shared_1")
        assert deleted.status_code == 200, deleted.text
        assert await voice_names(client, a.url) == []
        assert_openai_error(await speak(0, "shared_1"), 400, "voice")

        # one name registered on both at once: one 201 and one 409
        race = await asyncio.gather(*(register(client, s.url, "Race", reference_wav) for s in (a, b)))
        assert sorted(r.status_code for r in race) == [201, 409], [r.text for r in race]
        loser = next(r for r in race if r.status_code == 409)
        assert assert_openai_error(loser, 409, "name")["code"] == "voice_exists"
        assert (await register(client, b.url, "race", reference_wav)).status_code == 409  # any case

        # the voice limit (2) counts the voices of both servers
        assert (await register(client, b.url, "second", reference_wav)).status_code == 201
        full = await register(client, a.url, "third", reference_wav)
        assert assert_openai_error(full, 400, "name")["code"] == "voice_limit_reached"
        assert await voice_names(client, a.url) == await voice_names(client, b.url) == ["Race", "second"]

        # interleave: requests alternate between the servers, each finds every earlier turn
        for turn, text in enumerate(TEXTS):
            response = await speak(turn % 2, "husein", text, interleave_id="room-1")
            assert response.status_code == 200, response.text
            assert response.headers["X-Interleave-Turns"] == str(turn)
            prompt = fake_vllm.requests[-1].body["prompt"]
            history = [f"<|im_start|>husein: {earlier}<|speech_start|>" for earlier in TEXTS[:turn]]
            assert all(part in prompt for part in history), (turn, prompt)

        # /metrics on either server reports the sum of both (a request is counted once its handler
        # returns, just after its last byte reached the client: scrape until the last one is in)
        labels = {"method": "POST", "route": SPEECH, "status": "200"}
        exposition = [await settled_metrics(client, s.url, speeches[0] + speeches[1], labels) for s in (a, b)]
        for text in exposition:
            assert metric(text, "tts_http_requests_total", **labels) == speeches[0] + speeches[1]
            # the shared reference codes: the one clip was encoded once, by one of the servers
            assert metric(text, "tts_codec_batch_size_count", queue="encode") == 1
        assert speeches[0] > 0 and speeches[1] > 0
    # both shut down: their live gauges left the merged view, their counters stay
    assert not list(metrics_dir.glob("gauge_livesum_*.db"))
    assert len(list(metrics_dir.glob("counter_*.db"))) == 2
