"""Sampling maths on hand-made logits: the upstream examples, masking, order, greedy and seeding."""

from __future__ import annotations

import math

import pytest
import torch

from app.families.moss.lm.sampling import (
    RowParams,
    apply_repetition_penalty,
    choose_code,
    choose_codes,
    mask_specials,
    top_k_filter,
    top_p_filter,
)
from app.families.moss.lm.types import FrameSampling

NEG = float("-inf")


def test_top_k_keeps_ties_with_the_kth() -> None:
    out = top_k_filter(torch.tensor([0.0, 1.0, 2.0, 3.0, 3.0]), 3)
    assert out.tolist() == [NEG, NEG, 2.0, 3.0, 3.0]
    out = top_k_filter(torch.tensor([0.0, 2.0, 2.0, 3.0]), 2)  # the 2nd largest (2.0) is tied: both stay
    assert out.tolist() == [NEG, 2.0, 2.0, 3.0]
    assert top_k_filter(torch.tensor([1.0, 2.0]), 0).tolist() == [1.0, 2.0]  # off


def test_top_p_keeps_the_upstream_nucleus() -> None:
    out = top_p_filter(torch.tensor([0.0, 1.0, 2.0, 3.0, 3.0]), 0.6)
    assert out.tolist() == [NEG, NEG, NEG, 3.0, 3.0]
    peaked = top_p_filter(torch.tensor([0.0, 0.0, 10.0]), 0.01)  # the top one is always kept
    assert peaked.tolist() == [NEG, NEG, 10.0]
    assert top_p_filter(torch.tensor([1.0, 2.0]), 1.0).tolist() == [1.0, 2.0]  # off


def test_repetition_window_counts_each_code_once() -> None:
    history = torch.tensor([[0] * 16, [1] * 16, [1] * 16])  # codebook 0 saw 0, 1, 1
    recent = history[-2:, 0]  # the window: this codebook's last 2 frames
    assert recent.tolist() == [1, 1]
    logits = torch.tensor([2.0, 2.0, -2.0, 4.0])
    out = apply_repetition_penalty(logits, recent, 2.0)
    assert out.tolist() == [2.0, 1.0, -2.0, 4.0]  # only token 1, divided once (not by 4)
    negative = apply_repetition_penalty(torch.tensor([1.0, -1.0]), torch.tensor([1]), 1.5)
    assert negative.tolist() == [1.0, -1.5]  # negative logits are multiplied


def test_pad_and_bos_are_never_chosen_and_eos_only_on_head_zero() -> None:
    logits = torch.zeros(1027)
    logits[1024], logits[1025], logits[1026] = 50.0, 40.0, 30.0
    assert (
        choose_code(logits, 0, torch.tensor([], dtype=torch.long), FrameSampling(temperature=0), None) == 1026
    )
    for head in (1, 15):
        masked = mask_specials(logits, head)
        assert torch.isinf(masked[1024:]).all()
    greedy = FrameSampling(temperature=0.0)
    logits[7] = 1.0
    assert choose_code(logits, 3, torch.tensor([], dtype=torch.long), greedy, None) == 7
    gen = torch.Generator().manual_seed(0)
    hot = FrameSampling(temperature=5.0, top_k=0, top_p=1.0, repetition_penalty=1.0)
    picks = {choose_code(logits, 1, torch.tensor([], dtype=torch.long), hot, gen) for _ in range(300)}
    assert picks.isdisjoint({1024, 1025, 1026}) and len(picks) > 100


def test_penalty_comes_before_greedy_and_temperature_before_top_p() -> None:
    logits = torch.full((1027,), -5.0)
    logits[10], logits[11] = 3.0, 2.0
    greedy = FrameSampling(temperature=0.0, repetition_penalty=2.0)
    assert choose_code(logits, 0, torch.tensor([10]), greedy, None) == 11  # 3/2 < 2
    # only codes 10 and 11 are finite: 3.0 vs 2.8. At T=0.1 (30 vs 28) code 11 has 0.12 of the mass,
    # under 1 - top_p = 0.4, so top-p keeps code 10 alone; at T=1 it has 0.45 and both stay
    logits = torch.full((1027,), NEG)
    logits[10], logits[11] = 3.0, 2.8
    sharp = FrameSampling(temperature=0.1, top_p=0.6, top_k=30, repetition_penalty=1.0)
    gen = torch.Generator().manual_seed(1)
    assert {choose_code(logits, 0, torch.tensor([], dtype=torch.long), sharp, gen) for _ in range(50)} == {10}
    flat = FrameSampling(temperature=1.0, top_p=0.6, top_k=30, repetition_penalty=1.0)
    picks = {choose_code(logits, 0, torch.tensor([], dtype=torch.long), flat, gen) for _ in range(200)}
    assert picks == {10, 11}


def test_sampling_follows_the_generator() -> None:
    logits = torch.randn(1027, generator=torch.Generator().manual_seed(3))
    params = FrameSampling(temperature=1.0, top_k=50, top_p=0.9)
    none = torch.tensor([], dtype=torch.long)

    def draw(seed: int) -> list[int]:
        gen = torch.Generator().manual_seed(seed)
        return [choose_code(logits, 2, none, params, gen) for _ in range(20)]

    assert draw(5) == draw(5)
    assert draw(5) != draw(6)
    top50 = set(torch.topk(mask_specials(logits, 2), 50).indices.tolist())
    assert set(draw(7)) <= top50


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_sampled_frequencies_match_the_filtered_softmax(temperature: float) -> None:
    logits = torch.full((1027,), NEG)
    logits[:4] = torch.tensor([1.0, 0.5, 0.0, -3.0])
    params = FrameSampling(temperature=temperature, top_k=3, top_p=1.0, repetition_penalty=1.0)
    gen = torch.Generator().manual_seed(0)
    n = 4000
    counts = torch.zeros(4)
    for _ in range(n):
        counts[choose_code(logits, 1, torch.tensor([], dtype=torch.long), params, gen)] += 1
    expected = torch.softmax(logits[:3] / temperature, dim=0)
    assert counts[3] == 0  # cut by top-k
    for i in range(3):
        assert math.isclose(counts[i] / n, float(expected[i]), abs_tol=0.03)


def test_the_batched_sampler_chooses_what_each_row_would_alone() -> None:
    """``choose_codes`` over rows with mixed settings = ``choose_code`` row by row, same generators."""
    settings = [
        FrameSampling(temperature=0.0),
        FrameSampling(),
        FrameSampling(temperature=1.3, top_k=0, top_p=1.0, repetition_penalty=1.0),
        FrameSampling(temperature=0.5, top_k=3, top_p=0.9, repetition_penalty=1.5, repetition_window=2),
        FrameSampling(temperature=1.0, top_k=2000, top_p=0.3, repetition_penalty=0.8),
    ]
    gen = torch.Generator().manual_seed(0)
    for trial in range(20):
        logits = torch.randn(len(settings), 1027, generator=gen) * 3
        if trial % 2:
            logits[:, 1024:] += 20  # pad, BOS and EOS lead: only EOS, on head 0, may be chosen
        recent = torch.randint(0, 1027, (len(settings), 4), generator=gen)
        recent[1, 2:] = -1  # shorter histories are padded with -1
        recent[0] = -1
        head = trial % 16
        params = RowParams.of(settings, torch.device("cpu"))
        batched_gens = [torch.Generator().manual_seed(trial * 10 + i) for i in range(len(settings))]
        codes, failed = choose_codes(logits, head, recent, params, list(batched_gens))
        assert failed == {}
        for i, setting in enumerate(settings):
            alone_gen = torch.Generator().manual_seed(trial * 10 + i)
            row_recent = recent[i][recent[i] >= 0]
            assert int(codes[i]) == choose_code(logits[i], head, row_recent, setting, alone_gen), (trial, i)
            assert int(codes[i]) < 1024 or (head == 0 and int(codes[i]) == 1026)
