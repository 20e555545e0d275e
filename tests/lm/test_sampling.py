"""The batched sampler: the repetition penalty, greedy, top-k and top-p sets, the distribution it draws
from, its counter-based uniforms, a row that cannot sample, and B rows with mixed settings choosing what
each would alone."""

from __future__ import annotations

import math

import pytest
import torch

from app.lm.sampling import (
    CDF_BLOCK,
    TOP_P_CANDIDATES,
    BatchSampling,
    RowSampling,
    choose,
    inverse_cdf,
    penalize,
    uniforms,
)

CPU = torch.device("cpu")


def row(
    temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, penalty: float = 1.0, seed: int = 0
) -> RowSampling:
    return RowSampling(temperature, top_k, top_p, penalty, seed)


def draws(logits: torch.Tensor, setting: RowSampling, n: int, history: tuple[int, ...] = ()) -> list[int]:
    """``n`` draws of one row at counters 0..n-1 (one batch of n copies of the row)."""
    settings = BatchSampling.of([setting] * n, CPU)
    hist = torch.tensor([list(history)] * n, dtype=torch.long).reshape(n, len(history))
    ids, failed = choose(logits.repeat(n, 1), hist, settings, torch.arange(n))
    assert not failed.any()
    return ids.tolist()


def test_the_penalty_hits_each_id_once_and_skips_padding() -> None:
    logits = torch.tensor([[2.0, -2.0, 1.0, -1.0], [2.0, -2.0, 1.0, -1.0]])
    history = torch.tensor([[0, 1, 0, -1], [-1, -1, -1, -1]])  # id 0 twice; the second row has none
    out = penalize(logits.clone(), history, torch.tensor([2.0, 2.0]))
    assert out.tolist() == [[1.0, -4.0, 1.0, -1.0], [2.0, -2.0, 1.0, -1.0]]


def test_greedy_top_k_and_top_p_sets() -> None:
    logits = torch.tensor([[1.0, 3.0, 2.0]])
    assert set(draws(logits, row(temperature=0.0), 20)) == {1}
    assert set(draws(logits, row(top_k=1), 50)) == {1}
    assert set(draws(logits, row(top_k=2), 200)) == {1, 2}
    assert set(draws(logits, row(top_p=0.1), 50)) == {1}
    nucleus = torch.tensor([[0.5, 0.3, 0.2]]).log()
    assert set(draws(nucleus, row(top_p=0.6), 300)) == {0, 1}  # 0.5 before the third: it is out
    assert set(draws(nucleus, row(top_p=0.5), 300)) == {0}
    assert set(draws(torch.tensor([[5.0, 0.0, 4.0]]), row(temperature=0.0, penalty=2.0), 5, (0,))) == {2}


def test_the_draws_follow_the_distribution() -> None:
    logits = torch.tensor([[0.0, 1.0, 2.0, -1.0, 0.5]])
    n = 20000
    picks = draws(logits, row(temperature=0.7, top_k=4, seed=3), n)
    kept = torch.tensor([0.0, 1.0, 2.0, float("-inf"), 0.5])  # top-k drops the smallest
    expected = torch.softmax(kept / 0.7, dim=0)
    for i in range(5):
        assert math.isclose(picks.count(i) / n, float(expected[i]), abs_tol=0.012), i


@pytest.mark.parametrize("vocab", [5, CDF_BLOCK, CDF_BLOCK + 1, 65_537])
def test_the_block_by_block_search_finds_where_u_times_the_total_falls(vocab: int) -> None:
    """The id found is the one whose span of the exact (float64) running sum holds u x total, up to
    float32 rounding; never an id of weight 0; and each row's id is its id alone."""
    generator = torch.Generator().manual_seed(vocab)
    for _ in range(50):
        weights = (3 * torch.randn(8, vocab, generator=generator)).exp()
        weights[torch.rand(8, vocab, generator=generator) < 0.6] = 0.0  # holes, whole empty blocks
        weights[:, vocab // 2] += 1e-3
        u = torch.rand(8, generator=generator)
        u[0], u[1] = 0.0, 1.0 - 2**-24  # both ends of a uniform's range
        ids, failed = inverse_cdf(weights, u)
        assert not failed.any()
        assert (weights.gather(1, ids[:, None]) > 0).all()
        exact = torch.nn.functional.pad(weights.double().cumsum(1), (1, 0))  # [B, V + 1] from 0
        target = u.double() * exact[:, -1]
        slack = 1e-5 * exact[:, -1]
        assert (exact.gather(1, ids[:, None])[:, 0] <= target + slack).all()  # its span starts at or before
        assert (exact.gather(1, ids[:, None] + 1)[:, 0] >= target - slack).all()  # and ends at or after
        assert ids.tolist() == [int(inverse_cdf(weights[i : i + 1], u[i : i + 1])[0]) for i in range(8)]
    empty = torch.zeros(2, vocab)
    empty[1, 0] = float("nan")
    assert inverse_cdf(empty, torch.tensor([0.5, 0.5]))[1].tolist() == [True, True]


def test_uniforms_are_in_range_spread_and_depend_on_seed_and_counter() -> None:
    counter = torch.arange(50000)
    seeds = torch.full_like(counter, 12345)
    u = uniforms(seeds & 0xFFFFFFFF, seeds >> 32, counter)
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    assert abs(float(u.mean()) - 0.5) < 0.01 and abs(float(u.var()) - 1 / 12) < 0.003
    histogram = torch.histc(u, bins=10, min=0.0, max=1.0)
    assert float(histogram.min()) > 4700 and float(histogram.max()) < 5300
    other = uniforms(seeds & 0xFFFFFFFF, (seeds >> 32) + 1, counter)
    assert float((u == other).float().mean()) < 0.001
    assert torch.equal(u, uniforms(seeds & 0xFFFFFFFF, seeds >> 32, counter))  # a pure function


def test_a_row_whose_logits_are_not_finite_fails_alone() -> None:
    logits = torch.randn(3, 100)
    logits[1] = float("nan")
    settings = BatchSampling.of([row(seed=1), row(seed=2), row(temperature=0.0)], CPU)
    none = torch.zeros((3, 0), dtype=torch.long)
    ids, failed = choose(logits.clone(), none, settings, torch.zeros(3, dtype=torch.long))
    assert failed.tolist() == [False, True, False]
    assert int(ids[2]) == int(logits[2].argmax())


MIXED = [
    row(temperature=0.0),
    row(temperature=0.0, penalty=1.3),
    row(seed=1),
    row(temperature=0.6, penalty=1.15, seed=2),
    row(temperature=1.3, top_k=50, seed=3),
    row(temperature=0.8, top_k=3, top_p=0.9, penalty=1.5, seed=4),
    row(temperature=1.0, top_p=0.5, seed=5),
    row(temperature=2.0, top_p=0.99, seed=6),  # a nucleus beyond the first candidates: the whole sort
    row(temperature=1.0, top_k=100000, top_p=0.3, penalty=0.8, seed=2**40 + 7),
]


@pytest.mark.parametrize("vocab", [1027, 65537])
def test_each_row_of_a_batch_chooses_what_it_would_alone(vocab: int) -> None:
    gen = torch.Generator().manual_seed(vocab)
    for trial in range(4):
        logits = torch.randn(len(MIXED), vocab, generator=gen) * (1 + trial)
        history = torch.randint(0, vocab, (len(MIXED), 30), generator=gen)
        history[2, 10:] = -1  # shorter histories are padded with -1
        history[0] = -1
        counter = torch.randint(0, 1000, (len(MIXED),), generator=gen)
        ids, failed = choose(logits.clone(), history, BatchSampling.of(MIXED, CPU), counter)
        assert not failed.any()
        order = torch.randperm(len(MIXED), generator=gen).tolist()  # other neighbours, other order
        subset = order[: 1 + trial]
        some, _ = choose(
            logits[subset].clone(),
            history[subset],
            BatchSampling.of([MIXED[i] for i in subset], CPU),
            counter[subset],
        )
        assert some.tolist() == ids[subset].tolist()
        for i, setting in enumerate(MIXED):
            alone, _ = choose(
                logits[i : i + 1].clone(),
                history[i : i + 1],
                BatchSampling.of([setting], CPU),
                counter[i : i + 1],
            )
            assert int(alone) == int(ids[i]), (vocab, trial, i)


def test_the_wide_nucleus_needs_the_whole_sort() -> None:
    """The case the mixed test relies on: a flat row's top-p 0.99 nucleus is larger than the candidates."""
    probs = torch.softmax(torch.randn(65537, generator=torch.Generator().manual_seed(0)) / 2.0, dim=0)
    before = probs.sort(descending=True).values.cumsum(0)
    assert int((before < 0.99).sum()) > TOP_P_CANDIDATES
