"""``/ready`` says which dtype each MOSS part runs in and why: the real tiny LM and the tiny MOSS codec
loaded with MOSS_LM_DTYPE=auto and MOSS_CODEC_DTYPE=auto on faked CPU flags."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import torch

from app.codec import precision as codec_rule
from app.families.moss.lm import loader
from app.main import create_app
from tests.api.conftest import http_settings, serve_app
from tests.fakes.fake_vllm import FakeVLLM
from tests.packing import packs


@pytest.mark.parametrize(
    ("flags", "dtype", "why"),
    [
        ("avx2 avx512f avx512_bf16", "bfloat16", "auto: CPU with bf16 matrix instructions (avx512_bf16)"),
        ("avx2 fma", "float32", "auto: CPU without fast bf16 (no AMX or AVX-512-BF16)"),
    ],
)
async def test_ready_names_each_moss_parts_dtype_and_why(
    tiny_codec_dir: Path,
    tiny_moss_codec_dir: Path,
    moss_tts_dir: Path,
    fake_vllm: FakeVLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flags: str,
    dtype: str,
    why: str,
) -> None:
    monkeypatch.setattr(loader, "cpu_flags", lambda: frozenset(flags.split()))
    monkeypatch.setattr(codec_rule, "cpu_flags", lambda: frozenset(flags.split()))
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    settings = http_settings(
        tiny_codec_dir,
        fake_vllm.url,
        MODEL_FAMILIES=["neucodec", "moss"],
        MOSS_TTS_MODEL=str(moss_tts_dir),
        MOSS_CODEC_MODEL=str(tiny_moss_codec_dir),
        MOSS_LM_DTYPE="auto",
        MOSS_CODEC_DTYPE="auto",
        MOSS_CACHE_POSITIONS=600,
        INTERLEAVE_STORE="memory",
        VOICES_DIR=str(tmp_path / "voices"),
    )
    async with serve_app(create_app(settings)) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        ready = await client.get("/ready")
    assert ready.status_code == 200
    moss = ready.json()["moss"]  # not the first family: under its name
    assert moss["codec"]["decoder"]["dtype"] == dtype and moss["codec"]["decoder"]["reason"].startswith(why)
    assert moss["codec"]["encoder"] == {
        "dtype": "float32",
        "reason": "auto: float32, exact voice-prompt codes",
    }
    packed = packs(getattr(torch, dtype))  # the flags are faked for the choice; this CPU does the packing
    assert moss["codec"]["decoder"]["prepacked"] is packed  # MOSS_PREPACK on a CPU (the encoder is not)
    assert moss["lm"]["dtype"] == dtype and moss["lm"]["prepacked"] is packed
    assert moss["lm"]["precision"]["dtype"] == dtype and moss["lm"]["precision"]["reason"].startswith(why)
