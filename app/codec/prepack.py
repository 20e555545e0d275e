"""Weights laid out once for CPU inference: a module's ``nn.Linear`` and ``nn.Conv1d`` layers on oneDNN's
prepacked kernels.

**Why.** On a CPU, ``F.linear`` and ``F.conv1d`` hand a plain ``[out, in]`` weight to oneDNN (or MKL),
which re-lays it out into its blocked format on every call; for a model that runs a few rows or frames
at a time, that copy is a large share of the call. Laid out once ahead of time, the full-size NeuCodec
decoder decodes 20 codes in 34 ms instead of 49 in bfloat16 and in 56 ms instead of 111 in float32, and
a MOSS LM step and codec step take 1.3-1.4x less time in bfloat16 (2 cores with AVX-512-BF16;
docs/benchmarks.md). On layers of a few dozen channels (the test checkpoints) the packed op's fixed
cost makes it slower instead. Torch has no public API for this: the only supported route is
``torch.compile``'s freezing (inductor), which costs tens of seconds of compilation at startup (the
NeuCodec decoder compiled for 50 s under ``TORCH_COMPILE``) and recompiles on new shapes. So this
module calls by hand the two private oneDNN ops that inductor's freezing itself emits for these layers:

- **Linear**, weight ``[O, I]``: ``torch.ops.mkldnn._reorder_linear_weight(w, None)`` once; the forward
  is ``_linear_pointwise(x, packed, bias, "none", [], "")``, ``x [..., I]`` -> ``[..., O]``.
- **Conv1d**, weight ``[O, I / groups, K]``: run as a conv2d of height 1, its weight
  ``[O, I / groups, 1, K]`` reordered once with ``_reorder_convolution_weight(w4, [0, pad], [1, stride],
  [1, dilation], groups, None)``; the forward is ``_convolution_pointwise(x.unsqueeze(2), packed, bias,
  ...).squeeze(2)``, ``x [B, I, T]`` -> ``[B, O, T']`` (strided channels-last; the next op does not care).

**What a prepared layer keeps.** Its ``weight`` *is* the packed tensor: an opaque oneDNN tensor (layout
``torch._mkldnn``) of the layer's dtype, on the CPU, of the same shape (``[O, I, 1, K]`` for a Conv1d).
Code that reads ``layer.weight.dtype`` or ``.device`` keeps working, the plain weight is freed (no
second copy of the model in memory), ``weight.to_dense()`` gives the values back, and a plain op on it
(``F.linear(x, layer.weight)``) raises instead of computing garbage. A prepared layer has no parameters
(``state_dict()`` no longer holds these weights) and no gradients: prepare a model last, after loading,
casting and placing it, and only for inference.

**Convolutions below AVX-512.** Where oneDNN runs without AVX-512 (an AVX2-only CPU, or
``ONEDNN_MAX_CPU_ISA`` held below ``avx512_core``), its packed convolution falls to a slow kernel for most
widths (a 1024-channel, kernel-3 Conv1d over 27 frames: 70 ms instead of 1.5 ms plain, for 1-3, 5, 6,
9-15, 17, 18, 21, 25-27... frames), so there Conv1d layers stay plain by default (``convolutions``);
packed linears are fast on every ISA measured. oneDNN lays out bfloat16 weights only where it has
AVX-512 (avx512bw, vl, dq) or AVX-NE-CONVERT: elsewhere (an AVX2-only CPU asked for bfloat16) every layer
stays plain, with oneDNN's reason in the report.

**Fallback.** Each layer is checked once, at prepare time: a tiny seeded forward of the packed layer
against the plain one. A layer whose ops are missing (a build without oneDNN, some aarch64 hosts), raise
or give a wrong answer (relative error above ``tolerance``: a wrong layout is off by order 1, a correct
kernel by a few roundings) stays plain, and ``prepack_for_cpu`` says which and why. Only layers of
exactly these two classes are prepared (a subclass such as attention's ``out_proj`` may be read by its
parent as a plain weight), and only on the CPU: never on cuda or npu, and not under ``torch.compile``,
whose inductor does its own (the caller decides; this module does not look at settings).
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from app.codec.precision import cpu_flags

log = logging.getLogger(__name__)

CHECK_ROWS = 3  # frames of the check input (the Conv1d check adds its kernel's span)
Layer = nn.Linear | nn.Conv1d  # what is prepared (exactly these classes, not subclasses)


class PackedLinear(nn.Module):
    """``nn.Linear``'s forward on a weight laid out once: ``[..., I]`` -> ``[..., O]``."""

    weight: torch.Tensor
    bias: torch.Tensor | None

    def __init__(self, packed: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.out_features, self.in_features = packed.shape
        self.register_buffer("weight", packed, persistent=False)
        self.register_buffer("bias", bias, persistent=False)

    @classmethod
    def of(cls, linear: nn.Linear) -> PackedLinear:
        """The packed form of ``linear`` (its weight reordered; its bias shared)."""
        packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), None)
        return cls(packed, None if linear.bias is None else linear.bias.detach())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        bias = self.bias is not None
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={bias}"


class PackedConv1d(nn.Module):
    """``nn.Conv1d``'s forward (zero padding) on a weight laid out once, as a conv2d of height 1.

    ``[B, in_channels, T]`` -> ``[B, out_channels, T']`` with ``T'`` as ``nn.Conv1d`` gives it.
    """

    weight: torch.Tensor
    bias: torch.Tensor | None

    def __init__(
        self,
        packed: torch.Tensor,
        bias: torch.Tensor | None,
        padding: int,
        stride: int,
        dilation: int,
        groups: int,
    ) -> None:
        super().__init__()
        self.out_channels = packed.shape[0]
        self.in_channels = packed.shape[1] * groups
        self.kernel_size = packed.shape[-1]
        self._padding, self._stride, self._dilation = [0, padding], [1, stride], [1, dilation]
        self.groups = groups
        self.register_buffer("weight", packed, persistent=False)  # [O, I / groups, 1, K]
        self.register_buffer("bias", bias, persistent=False)

    @classmethod
    def of(cls, conv: nn.Conv1d) -> PackedConv1d:
        """The packed form of ``conv`` (zero or numeric padding only: the caller checks)."""
        assert isinstance(conv.padding, tuple)  # "same"/"valid" strings are left plain by _unsupported
        padding, stride, dilation = conv.padding[0], conv.stride[0], conv.dilation[0]
        weight = conv.weight.detach().unsqueeze(2)  # [O, I / groups, K] -> [O, I / groups, 1, K]
        packed = torch.ops.mkldnn._reorder_convolution_weight(
            weight, [0, padding], [1, stride], [1, dilation], conv.groups, None
        )
        bias = None if conv.bias is None else conv.bias.detach()
        return cls(packed, bias, padding, stride, dilation, conv.groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.mkldnn._convolution_pointwise(
            x.unsqueeze(2),  # [B, C, T] -> [B, C, 1, T]
            self.weight,
            self.bias,
            self._padding,
            self._stride,
            self._dilation,
            self.groups,
            "none",
            [],
            "",
        )
        return y.squeeze(2)  # [B, O, 1, T'] -> [B, O, T']

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"padding={self._padding[1]}, stride={self._stride[1]}, dilation={self._dilation[1]}, "
            f"groups={self.groups}, bias={self.bias is not None}"
        )


@dataclass(frozen=True)
class PrepackReport:
    """What ``prepack_for_cpu`` did: layers prepared, those kept plain because their check failed (with
    the reason for each), and the convolutions left plain by choice (below AVX-512)."""

    packed: int
    plain: dict[str, str] = field(default_factory=dict)  # layer name -> why it stayed plain
    convolutions_left: int = 0

    def summary(self) -> str:
        """One line for the log."""
        text = f"{self.packed} layers prepacked for the CPU"
        if self.convolutions_left:
            text += f", {self.convolutions_left} convolutions left plain (oneDNN below AVX-512)"
        if self.plain:
            reasons = sorted(set(self.plain.values()))
            text += f", {len(self.plain)} kept plain ({'; '.join(reasons)})"
        return text


AVX512_CORE = ("avx512f", "avx512bw", "avx512vl", "avx512dq")  # oneDNN's avx512_core
_ISA_BELOW_AVX512 = ("sse41", "avx", "avx2", "avx2_vnni", "avx2_vnni_2")  # ONEDNN_MAX_CPU_ISA values


def fast_packed_convolutions(
    flags: Iterable[str] | None = None, env: Mapping[str, str] | None = None
) -> bool:
    """Whether oneDNN runs its AVX-512 kernels here (the CPU has avx512_core and ``ONEDNN_MAX_CPU_ISA``
    does not hold it below), where packed convolutions are fast (module docstring)."""
    flags = set(cpu_flags() if flags is None else flags)
    limit = (os.environ if env is None else env).get("ONEDNN_MAX_CPU_ISA", "").strip().lower()
    return all(flag in flags for flag in AVX512_CORE) and limit not in _ISA_BELOW_AVX512


def tolerance(dtype: torch.dtype) -> float:
    """Largest relative error (Frobenius) of a packed layer's check against the plain one: two units of the
    dtype's rounding (bf16: 1.6%; rounding every output once more costs at most a quarter of that), at
    least 1e-4 (float32 sums in another order differ by about 1e-6; a wrong layout by order 1)."""
    return max(1e-4, 2 * torch.finfo(dtype).eps)


def _unsupported(layer: Layer) -> str | None:
    """Why ``layer`` cannot be prepared (None: it can)."""
    weight = layer.weight
    if weight.device.type != "cpu":
        return f"on {weight.device.type}, not the CPU"
    if not weight.dtype.is_floating_point:
        return f"{weight.dtype} weights"
    if isinstance(layer, nn.Conv1d) and (layer.padding_mode != "zeros" or isinstance(layer.padding, str)):
        return f"padding {layer.padding!r} / {layer.padding_mode}"
    return None


def _check_input(layer: Layer, generator: torch.Generator) -> torch.Tensor:
    """A small seeded input for ``layer`` in its dtype: ``[2, rows, I]`` (Linear) or ``[2, I, T]``."""
    if isinstance(layer, nn.Linear):
        shape = (2, CHECK_ROWS, layer.in_features)
    else:
        span = layer.dilation[0] * (layer.kernel_size[0] - 1) + layer.stride[0]
        shape = (2, layer.in_channels, span + CHECK_ROWS)
    return torch.randn(shape, generator=generator).to(layer.weight.dtype)


def _packed(layer: Layer, generator: torch.Generator) -> tuple[nn.Module | None, str]:
    """``layer``'s packed form if it computes what ``layer`` computes, else None and why not."""
    why = _unsupported(layer)
    if why is not None:
        return None, why
    try:
        packed = PackedLinear.of(layer) if isinstance(layer, nn.Linear) else PackedConv1d.of(layer)
        x = _check_input(layer, generator)
        with torch.inference_mode():
            want, got = layer(x).float(), packed(x).float()
    except Exception as exc:  # an op missing from this build, or refusing this shape or dtype
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
    if got.shape != want.shape:
        return None, f"output {tuple(got.shape)} instead of {tuple(want.shape)}"
    error = float((got - want).norm() / want.norm().clamp_min(1e-30))
    if not error <= tolerance(layer.weight.dtype):  # also catches NaN
        return None, f"relative error {error:.1e} against the plain layer"
    return packed, ""


def prepack_for_cpu(
    module: nn.Module, what: str = "module", seed: int = 0, convolutions: bool | None = None
) -> PrepackReport:
    """Replace, in place, every ``nn.Linear`` and ``nn.Conv1d`` of ``module`` (exactly those classes) with
    its prepacked form where that is exact (see the module docstring); the rest stays as it was.
    ``convolutions``: whether Conv1d layers are prepared too (None: where oneDNN runs AVX-512,
    ``fast_packed_convolutions``).

    Layers are replaced one parent at a time, so a plain weight is freed as soon as its layer is replaced
    (at most one parent's layers are held twice). A layer shared by several parents is prepared once.
    Logs one line about ``what`` (a warning when some layer stayed plain) and returns what it did.
    """
    generator = torch.Generator().manual_seed(seed)
    replaced: weakref.WeakKeyDictionary[nn.Module, nn.Module] = weakref.WeakKeyDictionary()
    plain: dict[str, str] = {}
    packed = left = 0
    if convolutions is None:
        convolutions = fast_packed_convolutions()
    kinds = (nn.Linear, nn.Conv1d) if convolutions else (nn.Linear,)

    def walk(parent: nn.Module, prefix: str) -> None:
        nonlocal packed, left
        for child_name, child in list(parent.named_children()):
            name = f"{prefix}.{child_name}" if prefix else child_name
            if type(child) is nn.Conv1d and nn.Conv1d not in kinds:
                left += 1
                continue
            if not isinstance(child, Layer) or type(child) not in kinds:
                walk(child, name)
                continue
            if child not in replaced:
                replacement, why = _packed(child, generator)
                if replacement is None:
                    plain[name] = why
                else:
                    packed += 1
                replaced[child] = child if replacement is None else replacement
            setattr(parent, child_name, replaced[child])

    walk(module, "")
    report = PrepackReport(packed, plain, left)
    log.log(logging.WARNING if plain else logging.INFO, "%s: %s", what, report.summary())
    return report
