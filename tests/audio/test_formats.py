"""Encoders: int16 conversion, streamed and buffered WAV read back with the ``wave`` module."""

from __future__ import annotations

import io
import struct
import wave

import numpy as np
import pytest

from app.audio.formats import (
    STREAM_DATA_SIZE,
    STREAM_RIFF_SIZE,
    PcmEncoder,
    WavBufferedEncoder,
    WavStreamEncoder,
    float_to_pcm16,
    make_encoder,
    wav_bytes,
)
from app.core.constants import SAMPLE_RATE


def noise(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1.2, 1.2, n).astype(np.float32)


def body(encoder, chunks: list[np.ndarray]) -> bytes:
    return encoder.header() + b"".join(encoder.push(c) for c in chunks) + encoder.flush()


def test_float_to_pcm16_rounds_and_clips() -> None:
    pcm = np.array([0.0, 1.0, -1.0, 2.0, -3.0, 0.5, -0.5, 1 / 32767 * 0.49, 1 / 32767 * 0.51], np.float32)
    got = np.frombuffer(float_to_pcm16(pcm), "<i2")
    assert got.tolist() == [0, 32767, -32767, 32767, -32767, 16384, -16384, 0, 1]
    assert float_to_pcm16(np.zeros(0, np.float32)) == b""


def test_pcm_encoder_is_raw_int16_le() -> None:
    pcm = noise(1000)
    enc = make_encoder("pcm", stream=True)
    assert isinstance(enc, PcmEncoder) and enc.media_type == "audio/pcm"
    assert body(enc, [pcm[:10], pcm[10:]]) == float_to_pcm16(pcm)
    assert make_encoder("pcm", stream=False).media_type == "audio/pcm"


def test_streamed_wav_header_fields() -> None:
    header = WavStreamEncoder().header()
    assert len(header) == 44
    riff, riff_size, wave_id, fmt_id, fmt_size = struct.unpack_from("<4sI4s4sI", header)
    audio_fmt, channels, rate, byte_rate, align, bits = struct.unpack_from("<HHIIHH", header, 20)
    data_id, data_size = struct.unpack_from("<4sI", header, 36)
    assert (riff, wave_id, fmt_id, fmt_size, data_id) == (b"RIFF", b"WAVE", b"fmt ", 16, b"data")
    assert (audio_fmt, channels, rate, byte_rate, align, bits) == (1, 1, 24000, 48000, 2, 16)
    assert (riff_size, data_size) == (STREAM_RIFF_SIZE, STREAM_DATA_SIZE)
    assert data_size == riff_size - 36 and data_size % 2 == 0 and riff_size < 2**31


@pytest.mark.parametrize("n", [0, 1, 480, 24_001])
def test_streamed_wav_opens_with_wave_and_reads_every_frame(n: int) -> None:
    pcm = noise(n, seed=n)
    enc = make_encoder("wav", stream=True)
    assert isinstance(enc, WavStreamEncoder) and enc.media_type == "audio/wav"
    chunks = np.array_split(pcm, 7)
    data = body(enc, chunks)
    assert data[44:] == float_to_pcm16(pcm)  # header, then the samples as they come
    with wave.open(io.BytesIO(data), "rb") as f:  # the reader only knows the placeholder sizes
        assert (f.getnchannels(), f.getsampwidth(), f.getframerate()) == (1, 2, SAMPLE_RATE)
        frames = f.readframes(f.getnframes())
    assert frames == float_to_pcm16(pcm)


@pytest.mark.parametrize("n", [0, 1, 12_345])
def test_wav_bytes_has_exact_sizes(n: int) -> None:
    pcm = noise(n, seed=n)
    data = wav_bytes(pcm)
    assert len(data) == 44 + 2 * n
    assert (
        struct.unpack_from("<I", data, 4)[0] == 36 + 2 * n and struct.unpack_from("<I", data, 40)[0] == 2 * n
    )
    with wave.open(io.BytesIO(data), "rb") as f:
        assert (f.getnchannels(), f.getsampwidth(), f.getframerate(), f.getnframes()) == (1, 2, 24000, n)
        assert f.readframes(n) == float_to_pcm16(pcm)
    with wave.open(io.BytesIO(wav_bytes(pcm, sample_rate=16000)), "rb") as f:
        assert f.getframerate() == 16000


def test_buffered_wav_encoder_writes_the_whole_file_at_flush() -> None:
    pcm = noise(5000)
    enc = make_encoder("wav", stream=False)
    assert isinstance(enc, WavBufferedEncoder) and enc.media_type == "audio/wav"
    assert enc.header() == b""
    assert enc.push(pcm[:100]) == b"" and enc.push(pcm[100:]) == b""
    assert enc.flush() == wav_bytes(pcm)


@pytest.mark.parametrize("fmt", ["pcm", "wav"])
@pytest.mark.parametrize("stream", [True, False])
def test_close_drops_buffered_audio_and_is_idempotent(fmt: str, stream: bool) -> None:
    enc = make_encoder(fmt, stream)
    enc.push(noise(100))
    enc.close()
    enc.close()
    if isinstance(enc, WavBufferedEncoder):
        assert enc.flush() == wav_bytes(noise(0))


@pytest.mark.parametrize("fmt", ["ogg", "MP3", "WAV", "", "pcm16"])
def test_unknown_format_is_rejected(fmt: str) -> None:
    with pytest.raises(ValueError, match="unsupported response_format"):
        make_encoder(fmt, stream=True)
