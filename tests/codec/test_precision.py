"""CODEC_DTYPE=auto: the dtype chosen for faked CPU capability probes, devices and explicit settings."""

from __future__ import annotations

import pytest
import torch

from app.codec.precision import choose_precision, cpu_bf16_matmul, cpu_flags

EPYC_BF16 = "fpu sse2 avx2 avx512f avx512bw avx512_vnni avx512_bf16 fma"
SAPPHIRE_RAPIDS = "fpu sse2 avx2 avx512f avx512_bf16 amx_tile amx_bf16 amx_int8"
AVX2_ONLY = "fpu sse2 avx avx2 fma f16c"
AVX512_NO_BF16 = "fpu sse2 avx2 avx512f avx512bw avx512_vnni"


@pytest.mark.parametrize(
    ("flags", "dtype", "why"),
    [
        (EPYC_BF16, "bfloat16", "avx512_bf16"),
        (SAPPHIRE_RAPIDS, "bfloat16", "amx_bf16+avx512_bf16"),
        (AVX2_ONLY, "float32", "no AMX or AVX-512-BF16"),
        (AVX512_NO_BF16, "float32", "no AMX or AVX-512-BF16"),
    ],
)
def test_auto_on_a_cpu_follows_its_bf16_matrix_instructions(flags: str, dtype: str, why: str) -> None:
    precision = choose_precision("auto", "cpu", flags=flags.split(), env={})
    assert precision.dtype == dtype and not precision.tf32
    assert why in precision.reason and precision.reason.startswith("auto: CPU")


def test_onednn_held_to_avx2_makes_a_bf16_cpu_choose_float32() -> None:
    precision = choose_precision("auto", "cpu", flags=EPYC_BF16.split(), env={"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert precision.dtype == "float32" and "ONEDNN_MAX_CPU_ISA=avx2" in precision.reason
    assert cpu_bf16_matmul(EPYC_BF16.split(), {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"})[0]


def test_accelerators() -> None:
    assert choose_precision("auto", "npu", flags=[]).dtype == "bfloat16"
    cuda = choose_precision("auto", "cuda", flags=[])
    assert (cuda.dtype, cuda.tf32) == ("float32", False) and "CUDA graphs" in cuda.reason
    assert choose_precision("auto", "cuda", tf32=True, flags=[]).tf32
    assert not choose_precision("auto", "cpu", tf32=True, flags=[], env={}).tf32  # TF32 is cuda only


@pytest.mark.parametrize("setting", ["float32", "bfloat16", "float16"])
def test_an_explicit_setting_always_wins(setting: str) -> None:
    for flags in (EPYC_BF16, AVX2_ONLY):
        precision = choose_precision(setting, "cpu", flags=flags.split(), env={})
        assert precision.dtype == setting and "explicit" in precision.reason
    slow = choose_precision("bfloat16", "cpu", flags=AVX2_ONLY.split(), env={})
    assert slow.slow and "WARNING" in slow.reason  # a warning at startup, and said in /ready
    assert precision.torch_dtype == getattr(torch, setting)


def test_cpu_flags_are_read_from_cpuinfo_text() -> None:
    text = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\n"
    assert cpu_flags(text) == {"fpu", "avx2", "avx512_bf16"}
    assert cpu_flags("Features\t: fp asimd bf16\n") == {"fp", "asimd", "bf16"}  # arm64 spelling


def test_without_cpuinfo_torch_probes_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True, raising=False)
    assert cpu_flags("") == {"avx512_bf16"}
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    assert cpu_flags("") == frozenset()
