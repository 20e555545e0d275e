"""Reading uploaded reference audio: formats, downmix, resampling, limits and every failure's error."""

from __future__ import annotations

import asyncio
import io

import numpy as np
import pytest

from app.audio.io import REFERENCE_RATE, load_reference, read_limited
from app.core.errors import InvalidRequest, PayloadTooLarge
from tests.speech_audio import FORMATS, espeak_wav, transcode, wav_bytes

LIMITS = {"min_s": 1.0, "max_s": 30.0, "param": "reference_audio"}


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """About 2.8 s of espeak-ng speech as a 22.05 kHz wav."""
    path = tmp_path_factory.mktemp("speech") / "ref.wav"
    return espeak_wav(path, "Hello there, this is a reference voice for the test.").read_bytes()


def invalid(data: bytes, code: str, **limits: object) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        load_reference(data, **(LIMITS | limits))
    assert info.value.param == "reference_audio" and info.value.code == code
    return info.value


def test_wav_is_resampled_to_16k_mono(speech: bytes) -> None:
    import soundfile as sf

    original, rate = sf.read(io.BytesIO(speech), dtype="float32")
    reference = load_reference(speech, **LIMITS)
    assert reference.samples.dtype == np.float32 and reference.samples.ndim == 1
    assert reference.samples.shape[0] == round(original.shape[0] * REFERENCE_RATE / rate)
    assert reference.duration_s == pytest.approx(original.shape[0] / rate, abs=1e-3)
    assert 0.3 < np.abs(reference.samples).max() <= 1.0


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_compressed_formats_decode_to_the_same_speech(speech: bytes, fmt: str) -> None:
    wav = load_reference(speech, **LIMITS)
    other = load_reference(transcode(speech, fmt), **LIMITS)
    # codec delay and padding move the ends by at most a few frames
    assert abs(other.samples.shape[0] - wav.samples.shape[0]) < 0.1 * REFERENCE_RATE
    rms = [float(np.sqrt(np.mean(x.samples**2))) for x in (wav, other)]
    assert rms[1] == pytest.approx(rms[0], rel=0.25)


def test_stereo_is_downmixed_by_averaging() -> None:
    t = np.arange(2 * 16000) / 16000
    left = 0.5 * np.sin(2 * np.pi * 220 * t)
    stereo = np.stack([left, np.zeros_like(left)], axis=1)
    reference = load_reference(wav_bytes(stereo, 16000), **LIMITS)
    np.testing.assert_allclose(reference.samples, left / 2, atol=1e-4)


def test_digest_is_the_content_of_the_decoded_audio(speech: bytes) -> None:
    a = load_reference(speech, **LIMITS)
    b = load_reference(speech, **LIMITS)
    c = load_reference(transcode(speech, "flac"), **LIMITS)
    assert a.digest == b.digest and len(a.digest) == 64
    assert c.digest == a.digest  # flac is lossless: same samples, same key


def test_not_audio_and_corrupt_are_400(speech: bytes) -> None:
    invalid(b"this is a text file, not audio\n" * 40, "invalid_audio")
    invalid(b"", "invalid_audio")
    invalid(speech[:40], "invalid_audio")  # a wav cut inside its header
    invalid(transcode(speech, "flac")[:60], "invalid_audio")


def test_too_short_and_too_long_are_400(speech: bytes) -> None:
    error = invalid(wav_bytes(np.zeros(8000), 16000), "audio_too_short")
    assert "shorter than 1 s" in error.message
    invalid(wav_bytes(np.zeros(31 * 16000), 16000), "audio_too_long")
    invalid(speech, "audio_too_long", max_s=2.0)
    for fmt in FORMATS:  # the compressed paths check the duration too
        invalid(transcode(speech, fmt), "audio_too_long", max_s=2.0)


def test_non_finite_samples_are_400() -> None:
    import soundfile as sf

    samples = np.zeros(2 * 16000, dtype=np.float32)
    samples[100] = np.nan
    out = io.BytesIO()
    sf.write(out, samples, 16000, format="WAV", subtype="FLOAT")
    invalid(out.getvalue(), "invalid_audio")


class Upload:
    """An ``UploadFile`` stand-in that counts what was read."""

    def __init__(self, data: bytes) -> None:
        self.file = io.BytesIO(data)

    async def read(self, size: int = -1) -> bytes:
        await asyncio.sleep(0)
        return self.file.read(size)


async def test_read_limited_stops_at_the_limit() -> None:
    assert await read_limited(Upload(b"x" * 3_000_000), 3_000_000, "audio_sample") == b"x" * 3_000_000
    big = Upload(b"x" * 5_000_000)
    with pytest.raises(PayloadTooLarge) as info:
        await read_limited(big, 2_500_000, "audio_sample")
    assert info.value.status == 413 and info.value.param == "audio_sample"
    assert big.file.tell() < 5_000_000, "reading stops once the limit is passed"
