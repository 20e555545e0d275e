"""FadeIn: exact raised-cosine shape, chunking independence, disabling, short inputs."""

from __future__ import annotations

import numpy as np
import pytest

from app.audio.fade import FadeIn
from tests.audio.chunking import stream

SR = 24_000


def test_shape_is_exact_raised_cosine() -> None:
    x = np.ones(1000, dtype=np.float32)
    y = stream(FadeIn(10.0), x, [1000])
    ramp = (0.5 * (1 - np.cos(np.pi * np.arange(240) / 240))).astype(np.float32)
    assert y.dtype == np.float32 and len(y) == 1000
    assert y[0] == 0.0
    np.testing.assert_array_equal(y[:240], ramp)
    np.testing.assert_array_equal(y[240:], x[240:])
    assert np.all(np.diff(y[:241]) > 0)


@pytest.mark.parametrize("sizes", [[1], [7], [239, 3], [5000]], ids=["1", "7", "239+3", "whole"])
def test_chunking_does_not_change_output(sizes: list[int]) -> None:
    x = np.random.default_rng(1).standard_normal(2000).astype(np.float32)
    ref = stream(FadeIn(10.0), x, [len(x)])
    np.testing.assert_array_equal(stream(FadeIn(10.0), x, sizes), ref)
    rnd = list(np.random.default_rng(2).integers(0, 60, 200))  # random, including empty chunks
    np.testing.assert_array_equal(stream(FadeIn(10.0), x, rnd), ref)


def test_zero_ms_disables() -> None:
    x = np.random.default_rng(3).standard_normal(500).astype(np.float32)
    np.testing.assert_array_equal(stream(FadeIn(0.0), x, [3]), x)


def test_short_inputs_and_input_not_modified() -> None:
    fade = FadeIn(10.0)
    assert fade.push(np.zeros(0, np.float32)).size == 0
    one = np.array([0.7], dtype=np.float32)
    assert fade.push(one).tolist() == [0.0]
    assert one[0] == np.float32(0.7)
    assert fade.flush().size == 0


def test_other_sample_rate_and_length() -> None:
    y = FadeIn(5.0, sample_rate=16_000).push(np.ones(100, np.float32))
    assert np.all(y[:80] < 1) and np.all(y[80:] == 1)


@pytest.mark.parametrize("ms", [-1.0, float("nan"), float("inf")])
def test_rejects_bad_length(ms: float) -> None:
    with pytest.raises(ValueError):
        FadeIn(ms)


def test_rejects_multichannel() -> None:
    with pytest.raises(ValueError):
        FadeIn().push(np.zeros((2, 10), np.float32))
