"""Prepacked CPU weights (app.codec.prepack): Linear and Conv1d layers compute what the plain layers do,
keep answering ``weight.dtype``/``.device`` without a second copy of the weights, and stay plain (with a
log line) where the oneDNN ops are missing, raise or answer wrongly."""

from __future__ import annotations

import gc
import logging
import weakref

import pytest
import torch
from torch import nn

from app.codec.prepack import PackedConv1d, PackedLinear, fast_packed_convolutions, prepack_for_cpu, tolerance
from app.families.neucodec.codec.config import NeuCodecConfig
from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.tools.precision.metrics import compare_tensors
from tests.packing import PACKED_DTYPES as DTYPES
from tests.packing import needs_bf16_packing, packs


def prepared(layer: nn.Module) -> nn.Module:
    """``layer`` inside a parent, prepared; returns what replaced it."""
    parent = nn.Sequential(layer)
    prepack_for_cpu(parent, convolutions=True)
    return parent[0]


def assert_close_to(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    """float32: allclose at 1e-5; bf16: within two units of bf16 rounding (``tolerance``, 1.6%)."""
    assert got.shape == want.shape and got.dtype == want.dtype
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    else:
        assert compare_tensors(want, got).rel_l2 <= tolerance(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
def test_linear_computes_what_the_plain_layer_does(dtype: torch.dtype, bias: bool) -> None:
    torch.manual_seed(0)
    plain = nn.Linear(48, 80, bias=bias).to(dtype)
    packed = prepared(plain)
    assert isinstance(packed, PackedLinear) and (packed.bias is not None) == bias
    inputs = [
        torch.randn(5, 48),  # rows
        torch.randn(2, 7, 48),  # batch x frames
        torch.randn(2, 48, 7).transpose(1, 2),  # not contiguous, as after a transpose
        torch.randn(1, 1, 48),  # one row
    ]
    with torch.inference_mode():
        for x in inputs:
            x = x.to(dtype)
            assert_close_to(packed(x), plain(x), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("kernel", "padding", "stride", "dilation", "groups", "bias"),
    [
        (3, 1, 1, 1, 1, True),  # the NeuCodec resnet blocks
        (7, 3, 1, 1, 1, True),  # the NeuCodec embed
        (1, 0, 1, 1, 1, False),
        (4, 0, 2, 1, 1, True),
        (3, 2, 1, 2, 2, True),
    ],
)
def test_conv1d_computes_what_the_plain_layer_does(
    dtype: torch.dtype, kernel: int, padding: int, stride: int, dilation: int, groups: int, bias: bool
) -> None:
    torch.manual_seed(0)
    plain = nn.Conv1d(
        32, 48, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias
    )
    plain = plain.to(dtype)
    packed = prepared(plain)
    assert isinstance(packed, PackedConv1d)
    inputs = [torch.randn(2, 32, 19), torch.randn(3, 11, 32).transpose(1, 2), torch.randn(1, 32, 9)]
    with torch.inference_mode():
        for x in inputs:
            x = x.to(dtype)
            assert_close_to(packed(x), plain(x), dtype)


def real_layers() -> list[nn.Module]:
    """One plain layer of each distinct configuration in the official-size NeuCodec decoder."""
    with torch.device("meta"):
        decoder = NeuCodecDecoder(NeuCodecConfig.official())
    found: dict[str, nn.Module] = {}
    for module in decoder.modules():
        if type(module) is nn.Linear:
            found.setdefault(
                repr(module), nn.Linear(module.in_features, module.out_features, module.bias is not None)
            )
        elif type(module) is nn.Conv1d:
            found.setdefault(
                repr(module),
                nn.Conv1d(
                    module.in_channels, module.out_channels, module.kernel_size, padding=module.padding
                ),
            )
    return list(found.values())


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_official_decoders_layer_shapes(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    layers = real_layers()
    assert len(layers) >= 8  # fc_post_a, project_in/out, embed, resnet convs, c_attn, c_proj, fc1, fc2, head
    for plain in layers:
        plain = plain.to(dtype)
        packed = prepared(plain)
        assert isinstance(packed, PackedLinear | PackedConv1d), plain
        if isinstance(plain, nn.Linear):
            x = torch.randn(2, 20, plain.in_features).to(dtype)
        else:
            x = torch.randn(2, 20, plain.in_channels).to(dtype).transpose(1, 2)  # [B, C, T] as the backbone
        with torch.inference_mode():
            assert_close_to(packed(x), plain(x), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_weight_keeps_dtype_device_and_values_without_a_second_copy(dtype: torch.dtype) -> None:
    layer = nn.Linear(16, 24).to(dtype)
    original = layer.weight.detach().clone()
    gone = weakref.ref(layer.weight)
    parent = nn.Sequential(layer)
    del layer
    prepack_for_cpu(parent, convolutions=True)
    gc.collect()
    assert gone() is None  # the plain weight is freed: the packed weight is the only copy
    packed = parent[0]
    assert (packed.weight.dtype, packed.weight.device.type, packed.weight.shape) == (dtype, "cpu", (24, 16))
    assert torch.equal(packed.weight.to_dense(), original)
    assert list(packed.parameters()) == [] and "weight" not in parent.state_dict()
    with pytest.raises((NotImplementedError, RuntimeError)):  # a plain op on it fails loudly
        torch.nn.functional.linear(torch.randn(2, 16).to(dtype), packed.weight)


@needs_bf16_packing
def test_a_conv1d_weight_keeps_its_dtype_with_a_height_of_one() -> None:
    packed = prepared(nn.Conv1d(8, 12, 3, padding=1).to(torch.bfloat16))
    assert packed.weight.dtype == torch.bfloat16 and packed.weight.shape == (12, 8, 1, 3)


def test_a_shared_layer_is_prepared_once_and_subclasses_are_left_alone() -> None:
    shared = nn.Linear(8, 8)
    attention = nn.MultiheadAttention(8, 2)  # its out_proj is a Linear subclass its forward reads as a weight
    model = nn.ModuleDict({"a": nn.Sequential(shared), "b": nn.Sequential(shared), "attention": attention})
    report = prepack_for_cpu(model, convolutions=True)
    assert report.packed == 1 and not report.plain
    assert model["a"][0] is model["b"][0] and isinstance(model["a"][0], PackedLinear)
    assert type(attention.out_proj) is nn.modules.linear.NonDynamicallyQuantizableLinear
    x = torch.randn(3, 1, 8)
    with torch.inference_mode():
        attention(x, x, x)  # still runs


def model() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.Conv1d(16, 16, 3, padding=1))


def test_a_missing_op_leaves_the_layers_plain_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def missing(*args: object) -> None:
        raise RuntimeError("mkldnn_reorder_linear_weight: ISA not supported")

    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", missing)
    layers = model()
    linear = layers[0]
    with caplog.at_level(logging.WARNING, logger="app.codec.prepack"):
        report = prepack_for_cpu(layers, "test model", convolutions=True)
    assert layers[0] is linear and isinstance(layers[1], PackedConv1d)  # the conv op still works
    assert report.packed == 1 and list(report.plain) == ["0"]
    assert "RuntimeError: mkldnn_reorder_linear_weight: ISA not supported" in report.plain["0"]
    assert "test model: 1 layers prepacked for the CPU, 1 kept plain (RuntimeError" in caplog.text
    with torch.inference_mode():
        layers[0](torch.randn(2, 8))


def test_bfloat16_layers_are_packed_exactly_where_onednn_lays_out_bfloat16(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """On a CPU with AVX-512 or AVX-NE-CONVERT both layers are packed; on one without (AVX2 only) both stay
    plain, each with oneDNN's reason in the report and the warning, and compute as before."""
    torch.manual_seed(0)
    layers = model().to(torch.bfloat16)
    linear, conv = layers[0], layers[1]
    x = torch.randn(2, 5, 8, dtype=torch.bfloat16)
    with torch.inference_mode():
        want = conv(linear(x).transpose(1, 2))
    with caplog.at_level(logging.WARNING, logger="app.codec.prepack"):
        report = prepack_for_cpu(layers, "bf16 model", convolutions=True)
    if packs(torch.bfloat16):
        assert isinstance(layers[0], PackedLinear) and isinstance(layers[1], PackedConv1d)
        assert report.packed == 2 and not report.plain
    else:
        assert layers[0] is linear and layers[1] is conv and report.packed == 0
        assert set(report.plain) == {"0", "1"} and all("bf16" in why for why in report.plain.values())
        assert "bf16 model: 0 layers prepacked for the CPU, 2 kept plain (RuntimeError" in caplog.text
    with torch.inference_mode():
        got = layers[1](layers[0](x).transpose(1, 2))
    assert compare_tensors(want.float(), got.float()).rel_l2 <= tolerance(torch.bfloat16)


def test_a_wrong_answer_leaves_the_layer_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    real = torch.ops.mkldnn._convolution_pointwise

    def transposed_kernel(x: torch.Tensor, *args: object) -> torch.Tensor:
        return real(x.flip(-1), *args)  # a kernel that reads time backwards

    monkeypatch.setattr(torch.ops.mkldnn, "_convolution_pointwise", transposed_kernel)
    layers = model()
    report = prepack_for_cpu(layers, convolutions=True)
    assert isinstance(layers[0], PackedLinear) and type(layers[1]) is nn.Conv1d
    assert report.plain["1"].startswith("relative error")


def test_only_cpu_layers_are_prepared() -> None:
    with torch.device("meta"):
        layers = model()
    report = prepack_for_cpu(layers, convolutions=True)
    assert report.packed == 0 and set(report.plain.values()) == {"on meta, not the CPU"}
    assert type(layers[0]) is nn.Linear and type(layers[1]) is nn.Conv1d


def test_a_string_padding_stays_plain() -> None:
    layers = nn.Sequential(nn.Conv1d(4, 4, 3, padding="same"))
    report = prepack_for_cpu(layers, convolutions=True)
    assert type(layers[0]) is nn.Conv1d and "padding 'same'" in report.plain["0"]


AVX512 = {"avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq"}


@pytest.mark.parametrize(
    ("flags", "env", "fast"),
    [
        (AVX512, {}, True),
        (AVX512 | {"avx512_bf16", "amx_bf16"}, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, True),
        (AVX512, {"ONEDNN_MAX_CPU_ISA": "AVX2"}, False),  # oneDNN held below AVX-512
        ({"avx2", "fma"}, {}, False),  # an AVX2-only CPU
        (AVX512 - {"avx512bw"}, {}, False),  # AVX-512 without avx512_core's parts
    ],
)
def test_packed_convolutions_are_chosen_where_onednn_runs_avx512(
    flags: set[str], env: dict[str, str], fast: bool
) -> None:
    assert fast_packed_convolutions(flags, env) is fast


def test_convolutions_can_be_left_plain_by_choice(caplog: pytest.LogCaptureFixture) -> None:
    layers = model()
    with caplog.at_level(logging.INFO, logger="app.codec.prepack"):
        report = prepack_for_cpu(layers, "avx2 model", convolutions=False)
    assert isinstance(layers[0], PackedLinear) and type(layers[1]) is nn.Conv1d
    assert (report.packed, report.plain, report.convolutions_left) == (1, {}, 1)
    assert "avx2 model: 1 layers prepacked for the CPU, 1 convolutions left plain" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # a choice, not a failure
