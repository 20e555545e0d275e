"""Codec output agreement: waveform SNR and a log-mel distance (torch only; no torchaudio, no librosa).

The log-mel distance is the mean over frames and mel bands of ``|10 log10(P_ref + floor) -
10 log10(P_test + floor)|`` in dB, where ``P`` is the power in each band of a Hann-windowed STFT and
``floor`` sits ``FLOOR_DB`` below the reference's loudest band, so that near-silent bands, whose
relative error means nothing to a listener, do not dominate. Scaling a waveform by ``g`` moves every
band above the floor by ``20 log10(g)`` dB.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from app.tools.precision.metrics import snr_db

N_FFT = 1024
HOP = 256
N_MELS = 80
FLOOR_DB = 80.0


def _hz_to_mel(hz: torch.Tensor) -> torch.Tensor:
    return 2595.0 * torch.log10(1.0 + hz / 700.0)


def _mel_to_hz(mel: torch.Tensor) -> torch.Tensor:
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


def mel_filterbank(sample_rate: int, n_fft: int = N_FFT, n_mels: int = N_MELS) -> torch.Tensor:
    """Triangular filters on the HTK mel scale from 0 Hz to Nyquist: ``[n_mels, n_fft // 2 + 1]``."""
    freqs = torch.linspace(0.0, sample_rate / 2, n_fft // 2 + 1, dtype=torch.float64)
    top = _hz_to_mel(torch.tensor(sample_rate / 2, dtype=torch.float64))
    edges = _mel_to_hz(torch.linspace(0.0, float(top), n_mels + 2, dtype=torch.float64))  # [n_mels + 2]
    low, centre, high = edges[:-2, None], edges[1:-1, None], edges[2:, None]  # each [n_mels, 1]
    rising = (freqs - low) / (centre - low)
    falling = (high - freqs) / (high - centre)
    return rising.minimum(falling).clamp_min(0.0)


def mel_power(audio: torch.Tensor, sample_rate: int) -> torch.Tensor:
    """Mel band power of mono audio ``[samples]`` (float64): ``[n_mels, frames]``."""
    audio = audio.detach().to("cpu", torch.float64).reshape(-1)
    if audio.numel() < N_FFT:
        audio = torch.nn.functional.pad(audio, (0, N_FFT - audio.numel()))
    window = torch.hann_window(N_FFT, dtype=torch.float64)
    spec = torch.stft(audio, N_FFT, HOP, window=window, center=False, return_complex=True)  # [bins, frames]
    return mel_filterbank(sample_rate) @ spec.abs().square()


@dataclass(frozen=True)
class AudioAgreement:
    """Waveform SNR and log-mel distance of a test waveform against its reference."""

    samples: int
    snr_db: float
    log_mel_db: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def compare_audio(reference: torch.Tensor, test: torch.Tensor, sample_rate: int) -> AudioAgreement:
    """Agreement of a test waveform with its reference (same shape; batch items are concatenated)."""
    if reference.shape != test.shape:
        raise ValueError(f"shapes differ: reference {tuple(reference.shape)}, test {tuple(test.shape)}")
    ref_mel, tst_mel = mel_power(reference, sample_rate), mel_power(test, sample_rate)
    peak = float(ref_mel.max())
    floor = peak * 10.0 ** (-FLOOR_DB / 10.0) if peak > 0 else 1e-20
    log_ref = 10.0 * torch.log10(ref_mel + floor)
    log_tst = 10.0 * torch.log10(tst_mel + floor)
    distance = float((log_ref - log_tst).abs().mean())
    return AudioAgreement(samples=reference.numel(), snr_db=snr_db(reference, test), log_mel_db=distance)
