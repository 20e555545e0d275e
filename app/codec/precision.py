"""Which precision the codec decoder runs in: ``CODEC_DTYPE=auto`` picks the fastest exact-enough one.

The choice depends on what the device can do fast, and it is explained (a startup log line and the
``/ready`` detail carry ``CodecPrecision.reason``):

- **CPU with bf16 matrix instructions** (AMX tiles or AVX-512-BF16): bfloat16 weights, about 3x the
  float32 speed at >= 30 dB SNR against float32 (the tests check the SNR);
- **other CPUs** (AVX2, AVX-512 without BF16): float32. bf16 is emulated there and many times slower;
  int8 dynamic quantization of the linear layers stays at about 21 dB SNR against float32, short of
  the 30 dB that adopting it would need, and ONNX Runtime was not measured at full size
  (docs/benchmarks.md; ``bench/cpu_precision_eval.py``);
- **NPU** (Ascend): bfloat16, the native matrix format of its cube units;
- **CUDA**: float32 with CUDA graphs (``CUDA_GRAPHS``); TF32 matrix products only when
  ``CODEC_TF32=true``.

An explicit ``CODEC_DTYPE`` always wins. The CPU probe reads the ISA flags (``/proc/cpuinfo`` on Linux,
else torch's own probes) and honours ``ONEDNN_MAX_CPU_ISA``: when oneDNN is held below AVX-512 (e.g.
``ONEDNN_MAX_CPU_ISA=AVX2``, which also makes a bf16-capable machine behave like an AVX2-only one for a
measurement), its bf16 kernels are not used, so bf16 is not chosen.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

BF16_MATMUL_FLAGS = ("amx_bf16", "avx512_bf16")
# ONEDNN_MAX_CPU_ISA values that keep oneDNN off its bf16 matrix kernels (oneDNN's names, any case)
_ISA_WITHOUT_BF16 = ("sse41", "avx", "avx2", "avx2_vnni", "avx2_vnni_2", "avx512_core", "avx512_core_vnni")


@dataclass(frozen=True)
class CodecPrecision:
    """The decoder's dtype, whether TF32 matrix products are on (cuda), and why."""

    dtype: str  # float32 | bfloat16 | float16
    tf32: bool
    reason: str
    slow: bool = False  # an explicit dtype that this CPU can only emulate (logged as a warning)

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    def detail(self) -> dict[str, object]:
        """What ``/ready`` shows about it."""
        return {"dtype": self.dtype, "tf32": self.tf32, "reason": self.reason}


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The ISA flags of this CPU: from ``cpuinfo`` text (default: /proc/cpuinfo), or, where there is none,
    the bf16 matrix flags torch's probes report."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.split(":", 1)[1].split())
    probes = {"amx_bf16": "_is_amx_tile_supported", "avx512_bf16": "_is_avx512_bf16_supported"}
    return frozenset(flag for flag, probe in probes.items() if getattr(torch.cpu, probe, lambda: False)())


def cpu_bf16_matmul(flags: Iterable[str], env: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """Whether a CPU with ``flags`` runs bf16 matrix products fast, and which flag (or limit) decides."""
    env = os.environ if env is None else env
    limit = env.get("ONEDNN_MAX_CPU_ISA", "").strip().lower()
    found = [flag for flag in BF16_MATMUL_FLAGS if flag in set(flags)]
    if found and limit in _ISA_WITHOUT_BF16:
        return False, f"{'+'.join(found)} present but ONEDNN_MAX_CPU_ISA={limit} keeps oneDNN off it"
    if found:
        return True, "+".join(found)
    return False, "no AMX or AVX-512-BF16"


def choose_precision(
    setting: str,
    device_kind: str,
    *,
    tf32: bool = False,
    flags: Iterable[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> CodecPrecision:
    """Resolve ``CODEC_DTYPE`` (``auto`` or an explicit dtype) for a ``cpu``/``cuda``/``npu`` device."""
    tf32 = tf32 and device_kind == "cuda"
    if setting != "auto":
        reason = f"CODEC_DTYPE={setting} (explicit)"
        slow = False
        if setting != "float32" and device_kind == "cpu":
            fast, why = cpu_bf16_matmul(cpu_flags() if flags is None else flags, env)
            if not fast:
                reason += f"; WARNING: this CPU has {why}, expect it to be many times slower than float32"
                slow = True
        return CodecPrecision(setting, tf32, reason, slow)
    if device_kind == "npu":
        return CodecPrecision("bfloat16", False, "auto: NPU, bf16 is its native matrix format")
    if device_kind == "cuda":
        products = "TF32 matrix products (CODEC_TF32)" if tf32 else "float32 matrix products"
        return CodecPrecision("float32", tf32, f"auto: CUDA, float32 weights with CUDA graphs and {products}")
    fast, why = cpu_bf16_matmul(cpu_flags() if flags is None else flags, env)
    if fast:
        return CodecPrecision("bfloat16", False, f"auto: CPU with bf16 matrix instructions ({why})")
    return CodecPrecision("float32", False, f"auto: CPU without fast bf16 ({why}), float32")
