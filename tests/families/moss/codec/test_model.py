"""Encode/decode shapes and frame arithmetic, residual codebooks, batched encodes, patch and RoPE maths."""

from __future__ import annotations

import math

import pytest
import torch

from app.families.moss.codec.model import MossAudioCodec
from app.families.moss.codec.transformer import Patch, apply_rope, rope_tables


def _audio(samples: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(samples, generator=torch.Generator().manual_seed(seed)) * 0.3


@pytest.mark.parametrize(
    ("samples", "frames"), [(1920, 1), (1920 * 7, 7), (1920 * 7 + 1919, 7), (1920 * 12 + 1, 12)]
)
def test_frame_arithmetic(tiny_moss: MossAudioCodec, samples: int, frames: int) -> None:
    [codes] = tiny_moss.encode([_audio(samples)], num_quantizers=16)
    assert codes.shape == (frames, 16) and codes.dtype == torch.int64
    assert int(codes.min()) >= 0 and int(codes.max()) < 1024
    audio = tiny_moss.decode(codes)
    assert audio.shape == (1920 * frames,) and audio.dtype == torch.float32
    assert torch.isfinite(audio).all() and audio.std() > 0.01


def test_a_partial_last_frame_is_dropped_not_padded(tiny_moss: MossAudioCodec) -> None:
    audio = _audio(1920 * 5 + 1000)
    [whole] = tiny_moss.encode([audio[: 1920 * 5]], 32)
    [with_tail] = tiny_moss.encode([audio], 32)
    assert torch.equal(whole, with_tail)


def test_first_codes_do_not_depend_on_the_codebook_count(tiny_moss: MossAudioCodec) -> None:
    audio = _audio(1920 * 6, seed=1)
    [all32] = tiny_moss.encode([audio], 32)
    for nq in (1, 8, 16):
        [fewer] = tiny_moss.encode([audio], nq)
        assert torch.equal(fewer, all32[:, :nq])


def test_decode_any_codebook_count(tiny_moss: MossAudioCodec) -> None:
    codes = torch.randint(0, 1024, (4, 32), generator=torch.Generator().manual_seed(2))
    for nq in (1, 16, 32):
        assert tiny_moss.decode(codes[:, :nq]).shape == (4 * 1920,)
    # more codebooks change the audio: each adds a residual term
    assert not torch.allclose(tiny_moss.decode(codes[:, :16]), tiny_moss.decode(codes))


def test_batched_encode_gives_each_clip_its_lone_codes(tiny_moss: MossAudioCodec) -> None:
    clips = [_audio(1920 * n + extra, seed=n) for n, extra in ((3, 0), (9, 500), (5, 1919))]
    together = tiny_moss.encode(clips, 16)
    for clip, codes in zip(clips, together, strict=True):
        assert torch.equal(codes, tiny_moss.encode([clip], 16)[0])


def test_batched_one_shot_decode_equals_lone_decodes(tiny_moss: MossAudioCodec) -> None:
    codes = torch.randint(0, 1024, (3, 10, 16), generator=torch.Generator().manual_seed(3))
    batch = tiny_moss.decode(codes)
    for row in range(3):
        torch.testing.assert_close(batch[row], tiny_moss.decode(codes[row]), atol=1e-5, rtol=0)


def test_bad_inputs(tiny_moss: MossAudioCodec) -> None:
    with pytest.raises(ValueError, match="at least 1920 samples"):
        tiny_moss.encode([_audio(1919)])
    with pytest.raises(ValueError, match="num_quantizers"):
        tiny_moss.encode([_audio(1920)], num_quantizers=33)
    with pytest.raises(ValueError, match=r"in \[0, 1024\)"):
        tiny_moss.decode(torch.full((2, 16), 1024))
    with pytest.raises(ValueError, match="codebooks"):
        tiny_moss.decode(torch.zeros(2, 33, dtype=torch.long))


def test_patch_down_then_up_is_the_identity_and_follows_the_formula() -> None:
    x = torch.arange(4 * 6 * 3, dtype=torch.float32).view(4 * 3, 6)  # [N*h, C], h = 3
    down = Patch(3, down=True)(x)
    assert down.shape == (4, 18)
    n, c, j = 2, 5, 1
    assert down[n, c * 3 + j] == x[n * 3 + j, c]  # out[n, c*h + j] = in[n*h + j, c]
    assert torch.equal(Patch(3, down=False)(down), x)


def test_rope_rotates_interleaved_pairs() -> None:
    x = torch.zeros(1, 1, 4)
    x[0, 0, 0], x[0, 0, 2] = 1.0, 1.0  # the real parts of pairs (0, 1) and (2, 3)
    cos, sin = rope_tables(torch.tensor([3]), head_dim=4, max_period=10000.0)
    out = apply_rope(x, cos, sin)[0, 0]
    angle0, angle1 = 3.0, 3.0 * 10000 ** (-2 / 4)
    expected = torch.tensor([math.cos(angle0), math.sin(angle0), math.cos(angle1), math.sin(angle1)])
    torch.testing.assert_close(out, expected)
