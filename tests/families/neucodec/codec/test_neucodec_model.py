"""NeuCodecDecoder: official key layout, output shape, exactness under batching, published math."""

from __future__ import annotations

import math

import pytest
import torch

from app.families.neucodec.codec.config import NeuCodecConfig
from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.codec.fsq import FSQLookup
from app.families.neucodec.codec.istft import ISTFT
from app.families.neucodec.codec.transformer import Attention, HeadIndexedRotary

HOP = 480


def _resnet(prefix: str, c: int) -> dict[str, tuple[int, ...]]:
    return {
        f"{prefix}.norm1.weight": (c,),
        f"{prefix}.norm1.bias": (c,),
        f"{prefix}.conv1.weight": (c, c, 3),
        f"{prefix}.conv1.bias": (c,),
        f"{prefix}.norm2.weight": (c,),
        f"{prefix}.norm2.bias": (c,),
        f"{prefix}.conv2.weight": (c, c, 3),
        f"{prefix}.conv2.bias": (c,),
    }


def _transformer(prefix: str, c: int) -> dict[str, tuple[int, ...]]:
    return {
        f"{prefix}.att_norm.weight": (c,),
        f"{prefix}.ffn_norm.weight": (c,),
        f"{prefix}.att.c_attn.weight": (3 * c, c),
        f"{prefix}.att.c_proj.weight": (c, c),
        f"{prefix}.mlp.fc1.weight": (4 * c, c),
        f"{prefix}.mlp.fc2.weight": (c, 4 * c),
    }


# The decoder part of neuphonic/neucodec's pytorch_model.bin, written out from the published modules.
_B = "generator.backbone"
OFFICIAL_DECODER_KEYS: dict[str, tuple[int, ...]] = {
    "fc_post_a.weight": (1024, 2048),
    "fc_post_a.bias": (1024,),
    "generator.quantizer.project_in.weight": (8, 2048),
    "generator.quantizer.project_in.bias": (8,),
    "generator.quantizer.project_out.weight": (2048, 8),
    "generator.quantizer.project_out.bias": (2048,),
    f"{_B}.embed.weight": (1024, 1024, 7),
    f"{_B}.embed.bias": (1024,),
    **_resnet(f"{_B}.prior_net.0", 1024),
    **_resnet(f"{_B}.prior_net.1", 1024),
    **{k: v for i in range(12) for k, v in _transformer(f"{_B}.transformers.{i}", 1024).items()},
    f"{_B}.final_layer_norm.weight": (1024,),
    f"{_B}.final_layer_norm.bias": (1024,),
    **_resnet(f"{_B}.post_net.0", 1024),
    **_resnet(f"{_B}.post_net.1", 1024),
    "generator.head.out.weight": (1922, 1024),
    "generator.head.out.bias": (1922,),
    "generator.head.istft.window": (1920,),
}


def _codes(batch: int, time: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, 65536, (batch, time), generator=torch.Generator().manual_seed(seed))


@pytest.mark.slow
def test_official_sizes_have_exactly_the_official_decoder_keys() -> None:
    with torch.device("meta"):
        model = NeuCodecDecoder(NeuCodecConfig.official())
    shapes = {key: tuple(value.shape) for key, value in model.state_dict().items()}
    assert len(OFFICIAL_DECODER_KEYS) == 117
    assert shapes == OFFICIAL_DECODER_KEYS


@pytest.mark.parametrize("time", [1, 2, 13, 50])
def test_decode_gives_hop_samples_per_code(tiny_decoder: NeuCodecDecoder, time: int) -> None:
    audio = tiny_decoder.decode(_codes(2, time))
    assert audio.shape == (2, time * HOP)
    assert audio.dtype == torch.float32
    assert torch.isfinite(audio).all()
    assert audio.std() > 1e-3  # random weights make noise, not silence


def test_decode_is_deterministic_and_dtype_agnostic(tiny_decoder: NeuCodecDecoder) -> None:
    codes = _codes(1, 20)
    first = tiny_decoder.decode(codes)
    assert torch.equal(first, tiny_decoder.decode(codes))
    assert torch.equal(first, tiny_decoder.decode(codes.to(torch.int32)))


def test_batched_decode_equals_each_item_alone(tiny_decoder: NeuCodecDecoder) -> None:
    codes = _codes(4, 37, seed=1)
    batched = tiny_decoder.decode(codes)
    for i in range(codes.shape[0]):
        alone = tiny_decoder.decode(codes[i : i + 1])
        torch.testing.assert_close(batched[i : i + 1], alone, atol=1e-5, rtol=1e-4)


def test_items_do_not_mix_across_the_batch(tiny_decoder: NeuCodecDecoder) -> None:
    codes = _codes(2, 30, seed=2)
    changed = codes.clone()
    changed[1] = _codes(1, 30, seed=3)[0]
    torch.testing.assert_close(tiny_decoder.decode(codes)[0], tiny_decoder.decode(changed)[0])


@pytest.mark.parametrize("lengths", [[37], [2, 9, 37], [30, 30], [5, 64, 2, 20, 11]])
def test_packed_windows_decode_as_each_alone(tiny_decoder: NeuCodecDecoder, lengths: list[int]) -> None:
    """Windows of different lengths in one call: each gets its lone decode (convolutions, group norms,
    attention and ISTFT never cross a window's edge). The tiny decoder's group norms take 2 channels a
    group, so its rounding is amplified (and a 1-code window, normalized over 2 values, is not compared
    here); the official decoder, 32 channels a group, keeps packed windows of 1 code and more within
    4e-6 of their lone decode in float32."""
    windows = [_codes(1, n, seed=10 + i)[0] for i, n in enumerate(lengths)]
    with torch.inference_mode():
        packed = tiny_decoder.forward_packed(torch.cat(windows), lengths)
    assert [tuple(audio.shape) for audio in packed] == [(n * HOP,) for n in lengths]
    for window, audio in zip(windows, packed, strict=True):
        torch.testing.assert_close(audio, tiny_decoder.decode(window[None])[0], atol=5e-5, rtol=1e-4)


def test_a_packed_window_does_not_depend_on_its_neighbours(tiny_decoder: NeuCodecDecoder) -> None:
    first, second = _codes(1, 24, seed=4)[0], _codes(1, 40, seed=5)[0]
    other = _codes(1, 33, seed=6)[0]
    with torch.inference_mode():
        together = tiny_decoder.forward_packed(torch.cat([first, second]), [24, 40])
        beside = tiny_decoder.forward_packed(torch.cat([other, first, other]), [33, 24, 33])
    torch.testing.assert_close(together[0], beside[1], atol=5e-5, rtol=1e-4)


def test_decode_of_zero_codes_is_empty(tiny_decoder: NeuCodecDecoder) -> None:
    assert tiny_decoder.decode(torch.zeros(3, 0, dtype=torch.long)).shape == (3, 0)


@pytest.mark.parametrize(
    ("codes", "message"),
    [
        (torch.tensor([[0, 65536]]), "out of range"),
        (torch.tensor([[-1, 5]]), "out of range"),
        (torch.tensor([[1.0, 2.0]]), "integer"),
        (torch.tensor([1, 2]), r"\[B, T\]"),
    ],
)
def test_decode_rejects_bad_codes(tiny_decoder: NeuCodecDecoder, codes: torch.Tensor, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tiny_decoder.decode(codes)


def test_fsq_splits_indices_into_base4_digits_least_significant_first() -> None:
    fsq = FSQLookup(vq_dim=16, levels=(4,) * 8)
    indices = torch.tensor([[0, 1, 4, 3 * 4**7, 65535]])
    values = fsq.codes_to_values(indices)[0]
    # digit d in 0..3 maps to (d - 2) / 2
    assert values[0].tolist() == [-1.0] * 8
    assert values[1].tolist() == [-0.5] + [-1.0] * 7
    assert values[2].tolist() == [-1.0, -0.5] + [-1.0] * 6
    assert values[3].tolist() == [-1.0] * 7 + [0.5]
    assert values[4].tolist() == [0.5] * 8
    # and back: sum of digits times place values recovers every index
    codes = torch.randint(0, 65536, (3, 11))
    digits = (fsq.codes_to_values(codes) * 2 + 2).round().long()
    assert torch.equal((digits * 4 ** torch.arange(8)).sum(-1), codes)


def _reference_rotary(x: torch.Tensor) -> torch.Tensor:
    """Published math, written plainly: pair (x[2i], x[2i+1]) of head h turns by h * 10000**(-2i/d)."""
    out = torch.empty_like(x)
    heads, dim = x.shape[1], x.shape[-1]
    for h in range(heads):
        for i in range(dim // 2):
            angle = h * 10000.0 ** (-2 * i / dim)
            pair = torch.complex(x[:, h, :, 2 * i], x[:, h, :, 2 * i + 1]) * complex(
                math.cos(angle), math.sin(angle)
            )
            out[:, h, :, 2 * i], out[:, h, :, 2 * i + 1] = pair.real, pair.imag
    return out


def test_rotary_turns_by_head_index_not_time() -> None:
    x = torch.randn(2, 4, 5, 16)
    rotated = HeadIndexedRotary(heads=4, head_dim=16)(x)
    torch.testing.assert_close(rotated, _reference_rotary(x), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rotated[:, 0], x[:, 0])  # head 0: angle 0


def _reference_attention(attn: Attention, x: torch.Tensor) -> torch.Tensor:
    batch, time, dim = x.shape
    heads = attn.heads
    qkv = x @ attn.c_attn.weight.T  # [B, T, 3 * C], laid out (r, h, d)
    q, k, v = (
        qkv[..., r * dim : (r + 1) * dim].reshape(batch, time, heads, -1).transpose(1, 2) for r in range(3)
    )
    q, k = _reference_rotary(q), _reference_rotary(k)
    scores = q @ k.transpose(-1, -2) / math.sqrt(dim // heads)
    y = scores.softmax(dim=-1) @ v  # [B, H, T, D], no causal mask
    return y.transpose(1, 2).reshape(batch, time, dim) @ attn.c_proj.weight.T


def test_attention_matches_the_published_math() -> None:
    torch.manual_seed(0)
    attn = Attention(dim=64, heads=4).eval()
    x = torch.randn(2, 9, 64)
    with torch.inference_mode():
        torch.testing.assert_close(attn(x), _reference_attention(attn, x), atol=1e-5, rtol=1e-4)


def test_head_indexed_rotary_cancels_in_attention_scores() -> None:
    """q and k of a head turn by the same angle, so the published rotary changes no score."""
    torch.manual_seed(0)
    attn = Attention(dim=64, heads=4).eval()
    plain = Attention(dim=64, heads=4).eval()
    plain.load_state_dict(attn.state_dict())
    plain.rotary = torch.nn.Identity()
    x = torch.randn(1, 7, 64)
    with torch.inference_mode():
        torch.testing.assert_close(attn(x), plain(x), atol=1e-5, rtol=1e-4)


def _reference_istft(spec: torch.Tensor, n_fft: int, hop: int) -> torch.Tensor:
    """Frame-by-frame overlap-add with window-envelope normalisation and "same" trimming."""
    batch, frames, _ = spec.shape
    window = torch.hann_window(n_fft)
    length = (frames - 1) * hop + n_fft
    audio, envelope = torch.zeros(batch, length), torch.zeros(length)
    for t in range(frames):
        audio[:, t * hop : t * hop + n_fft] += torch.fft.irfft(spec[:, t], n=n_fft) * window
        envelope[t * hop : t * hop + n_fft] += window**2
    pad = (n_fft - hop) // 2
    return (audio / envelope)[:, pad:-pad]


@pytest.mark.parametrize("frames", [1, 6])
def test_istft_matches_frame_by_frame_overlap_add(frames: int) -> None:
    spec = torch.randn(2, frames, 9, dtype=torch.complex64)
    out = ISTFT(n_fft=16, hop_length=4)(spec)
    assert out.shape == (2, frames * 4)
    torch.testing.assert_close(out, _reference_istft(spec, 16, 4), atol=1e-5, rtol=1e-5)


def test_istft_window_is_a_checkpoint_buffer() -> None:
    istft = ISTFT(n_fft=16, hop_length=4)
    assert torch.equal(istft.state_dict()["window"], torch.hann_window(16))
    with pytest.raises(ValueError, match="multiple"):
        ISTFT(n_fft=18, hop_length=4)
