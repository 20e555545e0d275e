"""CODEC_PREPACK: the NeuCodec decoder with its weights laid out once for the CPU decodes what the plain
decoder decodes, batches exactly, and is what the family serves on a CPU unless the setting says no."""

from __future__ import annotations

import math
from pathlib import Path

import httpx
import pytest
import torch

from app.codec.prepack import PackedConv1d, PackedLinear, prepack_for_cpu
from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.family import prepacks_codec
from app.families.neucodec.fixtures.codec import random_decoder
from app.main import create_app
from tests.api.conftest import fake_vllm, http_settings, serve_app  # noqa: F401 (fake_vllm: a fixture)
from tests.conftest import make_settings
from tests.fakes.fake_vllm import FakeVLLM
from tests.packing import PACKED_DTYPES, needs_bf16_packing


@pytest.mark.parametrize("prepack", [True, False])
async def test_the_server_decodes_with_what_the_setting_asks_for(
    tiny_codec_dir: Path,
    fake_vllm: FakeVLLM,  # noqa: F811 (the fixture)
    prepack: bool,
) -> None:
    app = create_app(http_settings(tiny_codec_dir, fake_vllm.url, CODEC_PREPACK=prepack))
    async with serve_app(app) as url, httpx.AsyncClient(timeout=10) as client:
        ready = (await client.get(url + "/ready")).json()
        speech = await client.post(
            url + "/v1/audio/speech", json={"input": "hello", "response_format": "pcm"}
        )
        codec = app.state.engine.default.codec
    assert ready["codec"]["prepacked"] is prepack
    decoder = codec.runner._forward  # the module the decode worker ran
    assert isinstance(decoder, NeuCodecDecoder) and isinstance(decoder.fc_post_a, PackedLinear) == prepack
    assert speech.status_code == 200 and len(speech.content) > 0


def decoders(dtype: torch.dtype) -> tuple[NeuCodecDecoder, NeuCodecDecoder]:
    """The tiny decoder in ``dtype``, plain and prepacked (the same weights)."""
    plain = random_decoder().cast(dtype)
    packed = random_decoder().cast(dtype)
    report = prepack_for_cpu(packed, convolutions=True)
    assert report.packed == 21 and not report.plain  # every Linear and Conv1d of the tiny decoder
    return plain, packed


def codes(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 65536, (batch, length), generator=torch.Generator().manual_seed(seed))


def relative_squared_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).pow(2).sum() / want.pow(2).sum())


def test_float32_prepacked_decode_equals_the_plain_decode() -> None:
    plain, packed = decoders(torch.float32)
    for window in (codes(1, 20), codes(2, 96, seed=1)):
        with torch.inference_mode():
            want, got = plain(window), packed(window)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        assert relative_squared_error(got, want) < 1e-9  # measured about 1e-11, at full size too


@needs_bf16_packing
def test_bfloat16_prepacked_decode_is_as_close_to_float32_as_the_plain_bf16_decode() -> None:
    """Packing changes where bf16 rounds in the convolutions (the linear layers give the same bits), so
    the bound is bf16's own error against the float32 decode: the prepacked bf16 decode keeps the plain
    bf16 decode's SNR against float32 (measured within 0.05 dB here; full size: 32.2 dB both), and differs
    from the plain bf16 decode by at most two such errors (another rounding of the same size; measured a
    twelfth of one here, nine tenths at full size: 5.4e-4 against 6.0e-4)."""
    reference = random_decoder()
    plain, packed = decoders(torch.bfloat16)
    window = codes(4, 96)
    with torch.inference_mode():
        want, bf16, got = reference(window), plain(window), packed(window)
    assert got.dtype == torch.float32  # the ISTFT stays float32
    own_error = relative_squared_error(bf16, want)
    snr_plain = -10 * math.log10(own_error)
    snr_packed = -10 * math.log10(relative_squared_error(got, want))
    assert snr_packed >= snr_plain - 0.5
    assert relative_squared_error(got, bf16) <= 2 * own_error


@pytest.mark.parametrize("dtype", PACKED_DTYPES)
def test_a_prepacked_batch_equals_its_rows_decoded_alone(dtype: torch.dtype) -> None:
    _, packed = decoders(dtype)
    window = codes(4, 64)
    with torch.inference_mode():
        batch = packed(window)
        alone = torch.cat([packed(window[row : row + 1]) for row in range(4)])
    assert torch.equal(batch, alone)


@needs_bf16_packing
def test_the_decoder_still_reads_its_dtype_and_device_from_its_weights() -> None:
    _, packed = decoders(torch.bfloat16)
    assert isinstance(packed.fc_post_a, PackedLinear)
    assert isinstance(packed.generator.backbone.embed, PackedConv1d)
    assert packed.fc_post_a.weight.dtype == torch.bfloat16  # decode() moves codes to its device
    assert packed.generator.quantizer.project_out.weight.dtype == torch.bfloat16  # FSQ casts to it
    audio = packed.decode(codes(1, 8))
    assert audio.shape == (1, 8 * packed.config.hop_length) and audio.dtype == torch.float32
    with pytest.raises(ValueError, match="out of range"):
        packed.decode(torch.tensor([[70_000]]))


def test_prepacking_follows_the_setting_the_device_and_compile() -> None:
    assert prepacks_codec(make_settings(), "cpu")
    assert not prepacks_codec(make_settings(CODEC_PREPACK=False), "cpu")
    assert not prepacks_codec(make_settings(TORCH_COMPILE=True), "cpu")  # inductor lays weights out itself
    assert not prepacks_codec(make_settings(), "cuda") and not prepacks_codec(make_settings(), "npu")
