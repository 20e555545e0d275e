"""Streamed decode: any chunking equals one-shot (within and past the 10 s context), batched steps with
streams joining and leaving equal lone steps, the state's size, and its release."""

from __future__ import annotations

import gc
import random
import weakref
from pathlib import Path

import pytest
import torch

from app.families.moss.codec.model import MAX_STEP_FRAMES, MossAudioCodec

TOL = 1e-5


def _codes(frames: int, seed: int, nq: int = 16) -> torch.Tensor:
    return torch.randint(0, 1024, (frames, nq), generator=torch.Generator().manual_seed(seed))


def _chunkings(frames: int, seed: int) -> dict[str, list[int]]:
    rng = random.Random(seed)
    randoms = []
    while sum(randoms) < frames:
        randoms.append(min(rng.randint(1, 7), frames - sum(randoms)))
    return {
        "ones": [1] * frames,
        "threes": [3] * (frames // 3) + ([frames % 3] if frames % 3 else []),
        "sevens": [7] * (frames // 7) + ([frames % 7] if frames % 7 else []),
        "random": randoms,
        "all": [frames],
    }


def _streamed(codec: MossAudioCodec, codes: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    state, start, pieces = codec.new_state(), 0, []
    for size in sizes:
        [piece] = codec.decode_step([codes[start : start + size]], [state])
        assert piece.shape == (size * 1920,)
        pieces.append(piece)
        start += size
    assert state.frames == codes.shape[0]
    return torch.cat(pieces)


@pytest.mark.parametrize("frames", [40, 125])
def test_any_chunking_equals_one_shot_within_the_context(tiny_moss: MossAudioCodec, frames: int) -> None:
    codes = _codes(frames, seed=frames)
    one_shot = tiny_moss.decode(codes)
    for name, sizes in _chunkings(frames, seed=frames).items():
        streamed = _streamed(tiny_moss, codes, sizes)
        assert (streamed - one_shot).abs().max() <= TOL, name


def test_past_the_context_streamed_still_equals_one_shot(tiny_moss: MossAudioCodec) -> None:
    """Ours keeps every key the exact 10 s window of each layer needs: no divergence after 125 frames
    (upstream's ring of `context` slots diverges there)."""
    frames = 150
    codes = _codes(frames, seed=7)
    one_shot = tiny_moss.decode(codes)
    for sizes in ([3] * 50, _chunkings(frames, seed=3)["random"]):
        assert (_streamed(tiny_moss, codes, sizes) - one_shot).abs().max() <= TOL


def test_batched_steps_with_streams_joining_and_leaving(tiny_moss: MossAudioCodec) -> None:
    rng = random.Random(5)
    streams = {
        name: _codes(n, seed=i) for i, (name, n) in enumerate([("a", 30), ("b", 18), ("c", 25), ("d", 9)])
    }
    joins = {"a": 0, "b": 0, "c": 3, "d": 6}  # c and d join later
    states, done, out = {}, dict.fromkeys(streams, 0), {name: [] for name in streams}
    for step in range(200):
        batch = [n for n in streams if joins[n] <= step and done[n] < streams[n].shape[0]]
        if not batch:
            break
        for name in batch:
            states.setdefault(name, tiny_moss.new_state())
        sizes = {n: min(rng.randint(1, 4), streams[n].shape[0] - done[n]) for n in batch}
        chunks = [streams[n][done[n] : done[n] + sizes[n]] for n in batch]
        for name, piece in zip(batch, tiny_moss.decode_step(chunks, [states[n] for n in batch]), strict=True):
            out[name].append(piece)
            done[name] += sizes[name]
    for name, codes in streams.items():
        assert done[name] == codes.shape[0]
        batched = torch.cat(out[name])
        alone = _streamed(
            tiny_moss, codes, [2] * (codes.shape[0] // 2) + [codes.shape[0] % 2] * (codes.shape[0] % 2)
        )
        assert (batched - alone).abs().max() <= TOL, name
        assert (batched - tiny_moss.decode(codes)).abs().max() <= TOL, name


def test_a_long_chunk_is_split_into_steps(tiny_moss: MossAudioCodec) -> None:
    codes = _codes(3 * MAX_STEP_FRAMES + 2, seed=9)
    streamed = _streamed(tiny_moss, codes, [codes.shape[0]])
    assert (streamed - tiny_moss.decode(codes)).abs().max() <= TOL


def test_state_size_and_release(tiny_moss: MossAudioCodec) -> None:
    state = tiny_moss.new_state()
    expected = 0
    for t, rate in zip(
        tiny_moss.decoder.transformers(), tiny_moss.decoder.positions_per_frame(), strict=True
    ):
        s = t.stage
        expected += s.num_layers * 2 * s.num_heads * (s.context + rate * MAX_STEP_FRAMES - 1) * s.head_dim * 4
    assert state.nbytes == expected
    tiny_moss.decode_step([_codes(2, seed=1)], [state])
    ring = weakref.ref(state.caches[0].kv)
    state.release()
    gc.collect()
    assert state.released and state.nbytes == 0 and ring() is None
    with pytest.raises(ValueError, match="released"):
        tiny_moss.decode_step([_codes(1, seed=1)], [state])


def test_a_stream_may_not_appear_twice_in_a_step(tiny_moss: MossAudioCodec) -> None:
    state = tiny_moss.new_state()
    with pytest.raises(ValueError, match="twice"):
        tiny_moss.decode_step([_codes(1, 0), _codes(1, 1)], [state, state])


def test_bfloat16_decoder_streams_close_to_float32(tiny_moss_dir: Path, tiny_moss: MossAudioCodec) -> None:
    from app.families.moss.codec.loading import load_codec

    low = load_codec(str(tiny_moss_dir), with_encoder=False, dtype=torch.bfloat16)
    assert low.quantizer.quantizers[0].codebook.weight.dtype == torch.float32  # the quantizer stays fp32
    state = low.new_state()
    assert state.caches[0].kv.dtype == torch.bfloat16
    assert state.nbytes * 2 == tiny_moss.new_state().nbytes
    codes = _codes(20, seed=11)
    reference = tiny_moss.decode(codes)
    streamed = _streamed(low, codes, [3] * 6 + [2])
    assert streamed.dtype == torch.float32
    snr = 10 * torch.log10(reference.pow(2).mean() / (streamed - reference).pow(2).mean())
    assert snr > 30, snr
