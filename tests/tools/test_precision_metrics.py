"""Precision metrics on synthetic tensors whose answers are known in closed form."""

from __future__ import annotations

import math

import pytest
import torch

from app.tools.precision.audio import compare_audio, mel_filterbank
from app.tools.precision.codes import compare_codes
from app.tools.precision.metrics import compare_next_token, compare_tensors, snr_db


def test_identical_tensors_agree_perfectly() -> None:
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    a = compare_tensors(x, x.clone())
    assert (a.shape, a.cosine, a.rel_l2, a.max_abs, a.mean_abs, a.snr_db) == (
        (3, 5),
        1.0,
        0.0,
        0.0,
        0.0,
        math.inf,
    )


def test_cosine_of_scaled_opposite_and_orthogonal_tensors() -> None:
    x = torch.tensor([3.0, 4.0])
    assert compare_tensors(x, 2 * x).cosine == pytest.approx(1.0)
    assert compare_tensors(x, -x).cosine == pytest.approx(-1.0)
    assert compare_tensors(x, torch.tensor([-4.0, 3.0])).cosine == pytest.approx(0.0, abs=1e-12)


def test_errors_of_a_known_perturbation() -> None:
    ref = torch.tensor([3.0, 4.0, 0.0, 0.0])  # |ref| = 5
    test = ref + torch.tensor([0.0, 0.0, 0.3, -0.4])  # |error| = 0.5, orthogonal to ref
    a = compare_tensors(ref, test)
    assert a.rel_l2 == pytest.approx(0.1)
    assert a.max_abs == pytest.approx(0.4)
    assert a.mean_abs == pytest.approx(0.7 / 4)
    assert a.snr_db == pytest.approx(20.0)  # error power 1% of signal power
    assert a.cosine == pytest.approx(5.0 / math.sqrt(25.25))


def test_snr_of_a_waveform_scaled_by_1_1_is_20_db() -> None:
    x = torch.randn(4800, generator=torch.Generator().manual_seed(1))
    assert snr_db(x, 1.1 * x) == pytest.approx(20.0)
    assert snr_db(torch.zeros(3), torch.ones(3)) == -math.inf


def test_bf16_inputs_are_compared_in_float64() -> None:
    ref = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    assert compare_tensors(ref, ref.float()).rel_l2 == 0.0


def test_shape_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="shapes differ"):
        compare_tensors(torch.zeros(2, 3), torch.zeros(3, 2))


def test_zero_reference_and_zero_test() -> None:
    a = compare_tensors(torch.zeros(4), torch.zeros(4))
    assert (a.cosine, a.rel_l2) == (1.0, 0.0)
    b = compare_tensors(torch.zeros(4), torch.ones(4))
    assert (b.cosine, b.rel_l2) == (0.0, math.inf)


# --- next-token checks ----------------------------------------------------------------------------


def test_identical_logits_have_full_agreement_and_zero_divergence() -> None:
    logits = torch.randn(7, 50, generator=torch.Generator().manual_seed(2))
    a = compare_next_token(logits, logits.clone(), topk=5)
    assert (a.positions, a.top1_agreement, a.topk_overlap, a.share_tv_above) == (7, 1.0, 1.0, 0.0)
    assert a.kl_max == pytest.approx(0.0, abs=1e-12)
    assert a.tv_mean == pytest.approx(0.0, abs=1e-12)


def test_two_token_distributions_with_known_kl_and_tv() -> None:
    # position 0: p = (0.8, 0.2), q = (0.5, 0.5): same top-1; position 1: swapped top-1
    p0, q0 = torch.tensor([0.8, 0.2]), torch.tensor([0.5, 0.5])
    p1, q1 = torch.tensor([0.6, 0.4]), torch.tensor([0.4, 0.6])
    ref, test = torch.stack([p0, p1]).log(), torch.stack([q0, q1]).log()
    a = compare_next_token(ref, test, topk=1, tv_threshold=0.25)
    kl0 = 0.8 * math.log(0.8 / 0.5) + 0.2 * math.log(0.2 / 0.5)
    kl1 = 0.6 * math.log(0.6 / 0.4) + 0.4 * math.log(0.4 / 0.6)
    assert a.kl == pytest.approx([kl0, kl1])
    assert a.tv == pytest.approx([0.3, 0.2])
    assert a.top1_agreement == 0.5
    assert a.topk_overlap == 0.5
    assert a.share_tv_above == 0.5  # only position 0 differs by more than 0.25
    assert a.kl_mean == pytest.approx((kl0 + kl1) / 2)


def test_temperature_sharpens_both_distributions() -> None:
    ref, test = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    assert (
        compare_next_token(ref, test, topk=1, temperature=0.1).tv[0]
        > compare_next_token(ref, test, topk=1).tv[0]
    )


def test_topk_overlap_counts_shared_members_of_the_top_k() -> None:
    ref = torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0]])
    test = torch.tensor([[5.0, 1.0, 3.0, 2.0, 4.0]])  # top-3: {0, 4, 2} vs {0, 1, 2}
    assert compare_next_token(ref, test, topk=3).topk_overlap == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("ref", "test", "kwargs", "message"),
    [
        (torch.zeros(2, 3), torch.zeros(3, 3), {}, "one shape"),
        (torch.zeros(0, 3), torch.zeros(0, 3), {}, "no positions"),
        (torch.zeros(2, 3), torch.zeros(2, 3), {"topk": 4}, "topk"),
        (torch.zeros(2, 3), torch.zeros(2, 3), {"topk": 1, "temperature": 0.0}, "temperature"),
    ],
)
def test_next_token_rejects_bad_input(
    ref: torch.Tensor, test: torch.Tensor, kwargs: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        compare_next_token(ref, test, **kwargs)


# --- audio ----------------------------------------------------------------------------------------


def _tone_noise(seconds: float = 1.0, rate: int = 24000) -> torch.Tensor:
    t = torch.arange(int(seconds * rate)) / rate
    noise = 0.05 * torch.randn(len(t), generator=torch.Generator().manual_seed(3))
    return 0.5 * torch.sin(2 * math.pi * 440 * t) + noise


def test_log_mel_distance_of_a_waveform_scaled_by_two_is_6_02_db() -> None:
    x = _tone_noise()
    a = compare_audio(x, 2 * x, 24000)
    # white noise keeps every band far above the -80 dB floor, so every band moves by 20 log10(2) dB
    assert a.log_mel_db == pytest.approx(20 * math.log10(2), abs=1e-3)
    assert a.snr_db == pytest.approx(0.0, abs=1e-9)  # the error is as large as the signal


def test_identical_audio_has_zero_log_mel_distance() -> None:
    x = _tone_noise()
    a = compare_audio(x, x.clone(), 24000)
    assert (a.log_mel_db, a.snr_db, a.samples) == (0.0, math.inf, 24000)


def test_mel_filterbank_covers_the_spectrum_with_unit_peaks() -> None:
    bank = mel_filterbank(24000)
    assert bank.shape == (80, 513)
    assert bank.min() >= 0 and bank.max() <= 1
    assert (bank.sum(0)[1:-1] > 0).all()  # every bin between DC and Nyquist falls in some band


# --- codes -----------------------------------------------------------------------------------------------


def test_code_agreement_per_codebook_and_in_every_codebook() -> None:
    ref = torch.arange(12).view(4, 3)  # 4 frames x 3 codebooks
    test = ref.clone()
    test[0, 2] = -1  # codebook 2 differs in frame 0
    test[1, 1:] = -1  # codebooks 1 and 2 differ in frame 1
    a = compare_codes(ref, test)
    assert (a.frames, a.codebooks) == (4, 3)
    assert a.per_codebook == [1.0, 0.75, 0.5]
    assert a.mean == pytest.approx(0.75)
    assert a.all_codebooks == 0.5  # frames 2 and 3
    one = compare_codes(torch.tensor([1, 2, 3, 4]), torch.tensor([1, 0, 3, 4]))
    assert (one.codebooks, one.per_codebook, one.all_codebooks) == (1, [0.75], 0.75)


@pytest.mark.parametrize(
    ("ref", "test", "match"),
    [
        (torch.zeros(3, 2, dtype=torch.long), torch.zeros(2, 2, dtype=torch.long), "shapes differ"),
        (torch.zeros(3, 2), torch.zeros(3, 2), "integer"),
        (torch.zeros(1, 3, 2, dtype=torch.long), torch.zeros(1, 3, 2, dtype=torch.long), "frames, codebooks"),
        (torch.zeros(0, 2, dtype=torch.long), torch.zeros(0, 2, dtype=torch.long), "no codes"),
    ],
)
def test_code_agreement_rejects_bad_input(ref: torch.Tensor, test: torch.Tensor, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        compare_codes(ref, test)
