"""Raw encodings of realtime streams: G.711 equal to the standard library's codec on every 16-bit value,
float32 and int16 PCM, and the rate change independent of how the PCM is chunked."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from app.audio.formats import make_encoder
from app.audio.raw import RawEncoder, alaw, encode_raw, mulaw

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop  # the reference (deprecated, gone in 3.13)


def test_g711_equals_the_standard_codec_on_every_value() -> None:
    pcm = (np.arange(-32768, 32768) / 32767).astype(np.float32)
    linear = np.rint(np.clip(pcm, -1, 1) * 32767).astype("<i2").tobytes()
    assert mulaw(pcm) == audioop.lin2ulaw(linear, 2)
    assert alaw(pcm) == audioop.lin2alaw(linear, 2)


def test_pcm_encodings() -> None:
    pcm = np.array([-1.5, -1.0, 0.0, 0.5, 1.0], dtype=np.float32)
    assert np.array_equal(np.frombuffer(encode_raw("pcm_f32le", pcm), "<f4"), np.clip(pcm, -1, 1))
    assert list(np.frombuffer(encode_raw("pcm_s16le", pcm), "<i2")) == [-32767, -32767, 0, 16384, 32767]
    with pytest.raises(ValueError, match="raw encoding"):
        encode_raw("pcm_u8", pcm)


@pytest.mark.parametrize("rate", [8000, 16000, 22050, 44100, 48000])
def test_resampling_does_not_depend_on_chunking(rate: int) -> None:
    pcm = np.sin(np.arange(24000 * 2) / 24000 * 2 * np.pi * 440).astype(np.float32) * 0.5

    def encoded(size: int) -> bytes:
        encoder = RawEncoder("pcm_f32le", rate)
        return b"".join(encoder.push(pcm[i : i + size]) for i in range(0, len(pcm), size)) + encoder.flush()

    whole, chunked = encoded(len(pcm)), encoded(997)
    assert len(whole) // 4 == pytest.approx(2 * rate, abs=2)
    assert np.allclose(np.frombuffer(whole, "<f4"), np.frombuffer(chunked, "<f4"), atol=1e-6)


def test_make_encoder_takes_a_rate_for_raw_encodings_only() -> None:
    assert make_encoder("pcm_mulaw", True, 8000).media_type == "audio/basic;rate=8000"
    with pytest.raises(ValueError, match="raw encoding"):
        make_encoder("mp3", True, 16000)
    with pytest.raises(ValueError, match="sample_rate"):
        RawEncoder("pcm_s16le", 4000)
