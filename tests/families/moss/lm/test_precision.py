"""MOSS_LM_DTYPE=auto: the codec's bf16 hardware rule on faked CPU flags, devices and explicit settings,
and the dtype the loaded LM really has."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from app.codec import precision as codec_rule
from app.families.moss.lm import loader
from app.families.moss.lm.loader import choose_precision
from app.families.moss.lm.stage import load_lm
from tests.families.moss.conftest import moss_settings

CPU = torch.device("cpu")
EPYC_BF16 = "fpu avx2 avx512f avx512_bf16"
SAPPHIRE = "avx2 avx512f avx512_bf16 amx_bf16 amx_tile"
AVX2 = "fpu sse4_2 avx avx2 fma"


@pytest.mark.parametrize(
    ("flags", "env", "expected"),
    [
        (EPYC_BF16, {}, "bfloat16"),
        (SAPPHIRE, {}, "bfloat16"),
        (AVX2, {}, "float32"),
        ("avx512f avx512_vnni", {}, "float32"),  # AVX-512 without BF16
        (EPYC_BF16, {"ONEDNN_MAX_CPU_ISA": "AVX2"}, "float32"),  # oneDNN held below its bf16 kernels
        (SAPPHIRE, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, "bfloat16"),
    ],
)
def test_auto_on_a_cpu_follows_the_codecs_rule(flags: str, env: dict[str, str], expected: str) -> None:
    chosen = choose_precision("auto", CPU, flags=flags.split(), env=env)
    assert chosen.dtype == expected and not chosen.slow
    assert chosen.dtype == codec_rule.choose_precision("auto", "cpu", flags=flags.split(), env=env).dtype
    assert chosen.reason.startswith("auto: CPU with" if expected == "bfloat16" else "auto: CPU without")
    if env and expected == "float32":
        assert "ONEDNN_MAX_CPU_ISA=avx2" in chosen.reason


def test_accelerators_run_the_released_dtype() -> None:
    chosen = choose_precision("auto", torch.device("cuda"), flags=AVX2.split(), env={})
    assert chosen.dtype == "bfloat16" and chosen.reason.startswith("auto: cuda")
    assert choose_precision("float32", torch.device("cuda"), flags=(), env={}).dtype == "float32"


def test_an_explicit_dtype_wins_and_an_emulated_one_is_flagged() -> None:
    exact = choose_precision("float32", CPU, flags=EPYC_BF16.split(), env={})
    assert (exact.dtype, exact.slow, exact.reason) == ("float32", False, "MOSS_LM_DTYPE=float32 (explicit)")
    fast = choose_precision("bfloat16", CPU, flags=EPYC_BF16.split(), env={})
    assert (fast.dtype, fast.slow) == ("bfloat16", False)
    slow = choose_precision("bfloat16", CPU, flags=AVX2.split(), env={})
    assert slow.dtype == "bfloat16" and slow.slow and "WARNING" in slow.reason
    with pytest.raises(ValueError, match="unknown dtype"):
        choose_precision("int8", CPU, flags=(), env={})


@pytest.mark.parametrize(("flags", "expected"), [(EPYC_BF16, torch.bfloat16), (AVX2, torch.float32)])
def test_the_server_loads_the_lm_in_the_chosen_dtype(
    tiny_moss_codec_dir: Path,
    moss_tts_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    flags: str,
    expected: torch.dtype,
) -> None:
    monkeypatch.setattr(loader, "cpu_flags", lambda: frozenset(flags.split()))
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    settings = moss_settings(tiny_moss_codec_dir, MOSS_TTS_MODEL=str(moss_tts_dir), MOSS_LM_DTYPE="auto")
    lm = load_lm(settings, "cpu")
    weights = {p.dtype for p in lm.engine.loaded.model.parameters()}  # type: ignore[attr-defined]
    assert weights == {expected}
    assert lm.precision is not None and lm.precision.dtype == str(expected).removeprefix("torch.")
    assert lm.engine.details()["dtype"] == lm.precision.dtype
