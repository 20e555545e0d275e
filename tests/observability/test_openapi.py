"""The OpenAPI document (examples, errors, auth), the Scalar page, and schemathesis finding no 5xx."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings

from tests.api.conftest import http_settings, serve
from tests.fakes.fake_vllm import FakeVLLM

EXAMPLES_PER_OPERATION = 6


def fuzz(base_url: str, document: dict[str, Any]) -> tuple[set[str], list[str]]:
    """Call every operation with generated requests (blocking; run in a thread): the operations
    called, and the 5xx answers."""
    schema = schemathesis.openapi.from_dict(document)
    called: set[str] = set()
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def call(case: Any) -> None:
            response = case.call(base_url=base_url, timeout=30)
            called.add(f"{case.method} {case.path}")
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.path}: {response.status_code} {response.text[:200]}")

        call()
    return called, failures


async def test_schemathesis_finds_no_server_errors(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path
) -> None:
    settings_ = http_settings(tiny_codec_dir, fake_vllm.url, VOICES_DIR=str(tmp_path / "voices"))
    async with serve(settings_) as url, httpx.AsyncClient() as client:
        document = (await client.get(url + "/openapi.json")).json()
        called, failures = await asyncio.to_thread(fuzz, url, document)
    assert failures == []
    assert {"POST /v1/audio/speech", "POST /v1/audio/vc", "POST /v1/audio/normalize"} <= called


async def test_document_has_examples_errors_and_auth(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    async with serve(http_settings(tiny_codec_dir, fake_vllm.url)) as url, httpx.AsyncClient() as client:
        document = (await client.get(url + "/openapi.json")).json()
        scalar = await client.get(url + "/scalar")
    speech = document["paths"]["/v1/audio/speech"]["post"]
    examples = speech["requestBody"]["content"]["application/json"]["examples"]
    assert {"stream_pcm", "sse_mp3", "whole_wav"} <= set(examples)
    assert set(speech["responses"]) >= {"200", "401", "422", "429"}
    assert speech["responses"]["429"]["headers"]["Retry-After"]
    assert speech["security"] == [{"bearerAuth": []}, {}]
    assert document["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert "security" not in document["paths"]["/health"]["get"]
    assert "/metrics" not in document["paths"]
    assert scalar.status_code == 200 and "text/html" in scalar.headers["content-type"]
    assert "/openapi.json" in scalar.text
