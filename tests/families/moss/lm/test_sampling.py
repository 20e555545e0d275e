"""Sampling maths on hand-made logits: the upstream examples, masking, order, greedy and seeding, and B
rows with mixed settings choosing what each would alone."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
import torch

from app.families.moss.lm.sampling import choose_codes, mask_specials, row_sampling
from app.families.moss.lm.types import FrameSampling
from app.lm.sampling import BatchSampling

NEG = float("-inf")
CPU = torch.device("cpu")


def padded(values: Sequence[float]) -> torch.Tensor:
    """1027 logits: ``values`` first, the rest -inf."""
    logits = torch.full((1027,), NEG)
    logits[: len(values)] = torch.tensor(values)
    return logits


def picks(
    logits: torch.Tensor, setting: FrameSampling, n: int = 1, head: int = 1, recent: Sequence[int] = ()
) -> list[int]:
    """Codebook ``head``'s codes of frames 0..n-1 of one row (``n`` copies in one batch)."""
    settings = BatchSampling.of([row_sampling(setting)] * n, CPU)
    history = torch.tensor([list(recent)] * n, dtype=torch.long).reshape(n, len(recent))
    codes, failed = choose_codes(logits.repeat(n, 1), head, history, settings, torch.arange(n))
    assert not failed.any()
    return codes.tolist()


HOT = FrameSampling(temperature=5.0, top_k=0, top_p=1.0, repetition_penalty=1.0, seed=0)
GREEDY = FrameSampling(temperature=0.0, seed=0)


def test_top_k_keeps_ties_with_the_kth() -> None:
    top3 = FrameSampling(temperature=5.0, top_k=3, top_p=1.0, repetition_penalty=1.0, seed=0)
    assert set(picks(padded([0.0, 1.0, 2.0, 3.0, 3.0]), top3, 300)) == {2, 3, 4}
    top2 = FrameSampling(temperature=5.0, top_k=2, top_p=1.0, repetition_penalty=1.0, seed=0)
    assert set(picks(padded([0.0, 2.0, 2.0, 3.0]), top2, 300)) == {1, 2, 3}  # the 2nd largest is tied
    assert set(picks(padded([1.0, 2.0]), HOT, 100)) == {0, 1}  # off


def test_top_p_keeps_the_upstream_nucleus() -> None:
    nucleus = FrameSampling(temperature=1.0, top_k=0, top_p=0.6, repetition_penalty=1.0, seed=0)
    assert set(picks(padded([0.0, 1.0, 2.0, 3.0, 3.0]), nucleus, 300)) == {3, 4}
    peaked = FrameSampling(temperature=1.0, top_k=0, top_p=0.01, repetition_penalty=1.0, seed=0)
    assert set(picks(padded([0.0, 0.0, 10.0]), peaked, 50)) == {2}  # the top one is always kept


def test_repetition_window_counts_each_code_once_and_multiplies_negatives() -> None:
    twice = FrameSampling(temperature=0.0, repetition_penalty=2.0)
    assert picks(padded([1.0, 3.0]), twice, recent=[1, 1]) == [1]  # 3 / 2 > 1 (divided once, not by 4)
    negative = FrameSampling(temperature=0.0, repetition_penalty=1.5)
    assert picks(padded([-1.2, -1.0]), negative, recent=[1, -1]) == [0]  # -1.5 < -1.2


def test_pad_and_bos_are_never_chosen_and_eos_only_on_head_zero() -> None:
    logits = torch.zeros(1027)
    logits[1024], logits[1025], logits[1026] = 50.0, 40.0, 30.0
    assert picks(logits, GREEDY, head=0) == [1026]
    for head in (1, 15):
        assert torch.isinf(mask_specials(logits.clone(), head)[1024:]).all()
    logits[7] = 1.0
    assert picks(logits, GREEDY, head=3) == [7]
    chosen = set(picks(logits, HOT, 300))
    assert chosen.isdisjoint({1024, 1025, 1026}) and len(chosen) > 100


def test_penalty_comes_before_greedy_and_temperature_before_top_p() -> None:
    logits = torch.full((1027,), -5.0)
    logits[10], logits[11] = 3.0, 2.0
    assert picks(logits, FrameSampling(temperature=0.0, repetition_penalty=2.0), head=0, recent=[10]) == [11]
    # only codes 10 and 11 are finite: 3.0 vs 2.8. At T=0.1 (30 vs 28) code 11 has 0.12 of the mass,
    # under 1 - top_p = 0.4, so top-p keeps code 10 alone; at T=1 it has 0.45 and both stay
    logits = padded([0.0] * 10 + [3.0, 2.8])
    logits[:10] = NEG
    sharp = FrameSampling(temperature=0.1, top_p=0.6, top_k=30, repetition_penalty=1.0, seed=1)
    assert set(picks(logits, sharp, 50, head=0)) == {10}
    flat = FrameSampling(temperature=1.0, top_p=0.6, top_k=30, repetition_penalty=1.0, seed=1)
    assert set(picks(logits, flat, 200, head=0)) == {10, 11}


def test_sampling_follows_the_seed() -> None:
    logits = torch.randn(1027, generator=torch.Generator().manual_seed(3))

    def draw(seed: int) -> list[int]:
        return picks(logits, FrameSampling(temperature=1.0, top_k=50, top_p=0.9, seed=seed), 20, head=2)

    assert draw(5) == draw(5)
    assert draw(5) != draw(6)
    top50 = set(torch.topk(mask_specials(logits.clone(), 2), 50).indices.tolist())
    assert set(draw(7)) <= top50


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_sampled_frequencies_match_the_filtered_softmax(temperature: float) -> None:
    logits = padded([1.0, 0.5, 0.0, -3.0])
    params = FrameSampling(temperature=temperature, top_k=3, top_p=1.0, repetition_penalty=1.0, seed=0)
    n = 4000
    chosen = picks(logits, params, n)
    expected = torch.softmax(logits[:3] / temperature, dim=0)
    assert chosen.count(3) == 0  # cut by top-k
    for i in range(3):
        assert math.isclose(chosen.count(i) / n, float(expected[i]), abs_tol=0.03)


def test_the_batched_sampler_chooses_what_each_row_would_alone() -> None:
    """``choose_codes`` over rows with mixed settings = each row in a batch of its own."""
    settings = [
        FrameSampling(temperature=0.0),
        FrameSampling(seed=1),
        FrameSampling(temperature=1.3, top_k=0, top_p=1.0, repetition_penalty=1.0, seed=2),
        FrameSampling(
            temperature=0.5, top_k=3, top_p=0.9, repetition_penalty=1.5, repetition_window=2, seed=3
        ),
        FrameSampling(temperature=1.0, top_k=2000, top_p=0.3, repetition_penalty=0.8, seed=4),
    ]
    rows = BatchSampling.of([row_sampling(s) for s in settings], CPU)
    alone = [BatchSampling.of([row_sampling(s)], CPU) for s in settings]
    gen = torch.Generator().manual_seed(0)
    for trial in range(20):
        logits = torch.randn(len(settings), 1027, generator=gen) * 3
        if trial % 2:
            logits[:, 1024:] += 20  # pad, BOS and EOS lead: only EOS, on head 0, may be chosen
        recent = torch.randint(0, 1027, (len(settings), 4), generator=gen)
        recent[1, 2:] = -1  # shorter histories are padded with -1
        recent[0] = -1
        head = trial % 16
        frames = torch.randint(0, 100, (len(settings),), generator=gen)
        codes, failed = choose_codes(logits.clone(), head, recent, rows, frames)
        assert not failed.any()
        for i in range(len(settings)):
            one, _ = choose_codes(
                logits[i : i + 1].clone(), head, recent[i : i + 1], alone[i], frames[i : i + 1]
            )
            assert int(codes[i]) == int(one), (trial, i)
            assert int(codes[i]) < 1024 or (head == 0 and int(codes[i]) == 1026)
