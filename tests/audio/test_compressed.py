"""mp3, opus, aac and flac encoders: decoded back with PyAV (FFmpeg), as LiveKit and most clients do.

Checked for each format, streamed and buffered: rate, channels, duration and alignment against the
input; bytes independent of chunking; every piece a streamed encoder returns is whole frames or pages;
bytes arrive while audio is pushed; tiny and silent inputs; nothing left behind by dropped encoders.
"""

from __future__ import annotations

import gc
import io
import os
import struct
import subprocess
import sys
import threading
import weakref
from pathlib import Path

import av
import numpy as np
import pytest

from app.audio.compressed import (
    LAME_ENCODER_DELAY,
    MP3_BITRATE,
    AvEncoder,
    _crc16,
    mp3_info_frame,
)
from app.audio.formats import SUPPORTED_FORMATS, float_to_pcm16, make_encoder
from app.core.constants import SAMPLE_RATE

FORMATS = ("mp3", "opus", "aac", "flac")
DEMUXER = {"mp3": "mp3", "opus": "ogg", "aac": "aac", "flac": "flac"}
DECODED_RATE = {"mp3": 24_000, "opus": 48_000, "aac": 24_000, "flac": 24_000}
# Decoded length - input length, in 24 kHz samples: [low, high]. See app/audio/compressed.py.
EXTRA = {"mp3": (0, 575), "opus": (0, 0), "aac": (1024, 2047), "flac": (0, 0)}
# Where input sample 0 lands in the decoded audio (AAC in ADTS cannot signal its priming).
OFFSET = {"mp3": 0, "opus": 0, "aac": 1024, "flac": 0}
# Waveform correlation of decoded and input noise (measured: mp3 0.990, aac 0.972, opus 0.941).
MIN_CORRELATION = {"mp3": 0.97, "aac": 0.95, "opus": 0.9}
MODES = [pytest.param(True, id="stream"), pytest.param(False, id="buffered")]


def speechlike(n: int, seed: int = 0) -> np.ndarray:
    """Band-limited noise (< ~4 kHz) with a syllable-rate envelope, peak ~0.5: float32 [n]."""
    rng = np.random.default_rng(seed)
    noise = np.convolve(rng.standard_normal(n + 5), np.ones(6) / 6, mode="valid")[:n]
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 4 * np.arange(n) / SAMPLE_RATE)
    return (0.5 * noise * envelope / max(np.abs(noise).max(initial=0), 1e-9)).astype(np.float32)


def encode(fmt: str, stream: bool, chunks: list[np.ndarray]) -> list[bytes]:
    """[header, push outputs..., flush] of a fresh encoder."""
    enc = make_encoder(fmt, stream)
    return [enc.header(), *(enc.push(c) for c in chunks), enc.flush()]


def decode(data: bytes, fmt: str) -> np.ndarray:
    """Decode a whole body with FFmpeg: float32 mono samples at the format's decoded rate."""
    out = []
    with av.open(io.BytesIO(data), format=DEMUXER[fmt]) as container:
        for frame in container.decode(audio=0):
            assert frame.layout.nb_channels == 1 and frame.sample_rate == DECODED_RATE[fmt]
            samples = frame.to_ndarray().reshape(-1)
            out.append(samples / 32768 if samples.dtype == np.int16 else samples)
    return np.concatenate(out).astype(np.float32) if out else np.zeros(0, np.float32)


def pcm16(decoded: np.ndarray) -> np.ndarray:
    """Back to the int16 samples a 16-bit decoder produced (``decode`` divides them by 32768)."""
    return np.rint(decoded * 32768).astype(np.int16)


def pcm16_of(pcm: np.ndarray) -> np.ndarray:
    """The int16 samples the pcm format sends for ``pcm``."""
    return np.frombuffer(float_to_pcm16(pcm), "<i2")


def at_24k(decoded: np.ndarray, fmt: str) -> np.ndarray:
    """Decoded audio at 24 kHz (opus decodes at 48 kHz; the test signal is below 6 kHz)."""
    return decoded[::2] if DECODED_RATE[fmt] == 48_000 else decoded


def chunked(pcm: np.ndarray, sizes: list[int]) -> list[np.ndarray]:
    bounds = np.cumsum(sizes)
    return np.split(pcm, bounds[bounds < len(pcm)])


def mp3_frames(data: bytes) -> list[bytes]:
    """Split MPEG-2 Layer III (24 kHz, mono) into frames; fails unless it is whole frames."""
    frames, pos = [], 0
    while pos < len(data):
        b = data[pos : pos + 4]
        assert len(b) == 4 and b[0] == 0xFF and b[1] == 0xF3, f"no MPEG-2 L3 sync at {pos}"
        assert (b[2] >> 2) & 3 == 1 and b[3] >> 6 == 3, "expected 24 kHz mono"
        kbps = (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160)[b[2] >> 4]
        size = 72 * kbps * 1000 // SAMPLE_RATE + ((b[2] >> 1) & 1)
        assert pos + size <= len(data), "partial frame at the end"
        frames.append(data[pos : pos + size])
        pos += size
    return frames


def adts_frames(data: bytes) -> list[bytes]:
    """Split ADTS into frames; fails unless it is whole frames."""
    frames, pos = [], 0
    while pos < len(data):
        b = data[pos : pos + 7]
        assert len(b) == 7 and b[0] == 0xFF and b[1] & 0xF0 == 0xF0, f"no ADTS sync at {pos}"
        size = (b[3] & 3) << 11 | b[4] << 3 | b[5] >> 5
        assert pos + size <= len(data), "partial frame at the end"
        frames.append(data[pos : pos + size])
        pos += size
    return frames


def ogg_pages(data: bytes) -> list[tuple[int, int, bytes]]:
    """Split Ogg into pages: (header type, granule position, payload); fails unless whole pages."""
    pages, pos = [], 0
    while pos < len(data):
        assert data[pos : pos + 4] == b"OggS", f"no page at {pos}"
        header_type, granule = data[pos + 5], struct.unpack_from("<q", data, pos + 6)[0]
        nseg = data[pos + 26]
        body = pos + 27 + nseg
        size = sum(data[pos + 27 : body])
        assert body + size <= len(data), "partial page at the end"
        pages.append((header_type, granule, data[body : body + size]))
        pos = body + size
    return pages


def test_formats_and_content_types() -> None:
    assert SUPPORTED_FORMATS == ("pcm", "wav", "mp3", "opus", "aac", "flac")
    types = {"mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac", "flac": "audio/flac"}
    for fmt, media_type in types.items():
        for stream in (True, False):
            enc = make_encoder(fmt, stream)
            assert isinstance(enc, AvEncoder) and enc.media_type == media_type
            enc.close()


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_decodes_to_the_input_duration_and_waveform(fmt: str, stream: bool) -> None:
    pcm = speechlike(60_013)  # 2.5 s, not a multiple of any frame size
    body = b"".join(encode(fmt, stream, chunked(pcm, [1000, 7, 4801] * 20)))
    decoded = at_24k(decode(body, fmt), fmt)
    low, high = EXTRA[fmt]
    assert low <= len(decoded) - len(pcm) <= high
    if fmt == "flac":  # lossless: exactly the 16-bit samples the pcm format sends
        assert np.array_equal(pcm16(decoded), pcm16_of(pcm))
        return
    # Aligned with the input (no lag) and close to it: cross-correlation peaks at the expected offset.
    ref = pcm[2000:-2000]
    offset = OFFSET[fmt]
    lags = range(offset - 300, offset + 301)
    corr = [float(np.dot(ref, decoded[2000 + lag : 2000 + lag + len(ref)])) for lag in lags]
    assert lags[int(np.argmax(corr))] == offset
    got = decoded[2000 + offset : 2000 + offset + len(ref)]
    assert np.corrcoef(ref, got)[0, 1] > MIN_CORRELATION[fmt]


@pytest.mark.parametrize("fmt", FORMATS)
def test_bytes_do_not_depend_on_chunking(fmt: str) -> None:
    pcm = speechlike(3_001, seed=1)
    rng = np.random.default_rng(2)
    ways = [[3_001], [1] * 3_001, [5, 1, 1024, 3, 480, 2], list(rng.integers(1, 700, 20))]
    for stream in (True, False):
        bodies = {b"".join(encode(fmt, stream, chunked(pcm, sizes))) for sizes in ways}
        assert len(bodies) == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_streamed_pieces_are_whole_frames_and_arrive_during_push(fmt: str) -> None:
    pcm = speechlike(5 * SAMPLE_RATE, seed=3)
    pieces = encode(fmt, True, chunked(pcm, [SAMPLE_RATE // 2] * 10))
    header, pushed = pieces[0], pieces[1:-1]
    assert all(pushed), "every 0.5 s push returns bytes"
    assert sum(map(len, pushed)) > 0.9 * sum(map(len, pieces))
    # Every piece ends on a frame (page) boundary: a client may stop reading after any of them.
    for piece in pieces:
        if fmt == "mp3":
            mp3_frames(piece)
        elif fmt == "aac":
            adts_frames(piece)
        elif fmt == "opus":
            ogg_pages(piece)
    if fmt == "flac":  # no length field in FLAC frames: each prefix decodes to whole 2304-sample blocks
        assert header[:4] == b"fLaC"
        for k in range(1, len(pushed) + 1):
            assert len(decode(b"".join(pieces[: k + 1]), fmt)) == k * SAMPLE_RATE // 2 // 2304 * 2304
    # Cut after any push, the stream still decodes (what a disconnecting client's decoder sees).
    for k in (1, 5):
        assert len(decode(b"".join(pieces[: k + 1]), fmt)) > 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_buffered_returns_everything_at_flush(fmt: str) -> None:
    pcm = speechlike(30_000, seed=4)
    pieces = encode(fmt, False, chunked(pcm, [4_000] * 8))
    assert not any(pieces[:-1]) and pieces[-1]


@pytest.mark.parametrize("stream", MODES)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("n", [0, 1, 100])
def test_tiny_inputs_give_valid_files(fmt: str, stream: bool, n: int) -> None:
    pcm = speechlike(n, seed=n)
    decoded = at_24k(decode(b"".join(encode(fmt, stream, [pcm])), fmt), fmt)
    low, high = EXTRA[fmt]
    if n == 0 and fmt != "flac":
        low, high = low + 1, high + 1  # one sample of silence: these formats cannot hold an empty stream
    assert low <= len(decoded) - n <= high


@pytest.mark.parametrize("fmt", FORMATS)
def test_silence_and_overload(fmt: str) -> None:
    silence = np.zeros(SAMPLE_RATE, np.float32)
    decoded = decode(b"".join(encode(fmt, True, [silence])), fmt)
    assert np.abs(decoded).max() < 1e-3
    loud = np.full(5_000, 3.0, np.float32)  # clipped to full scale like the pcm format
    decoded = decode(b"".join(encode(fmt, False, [loud, -loud])), fmt)
    assert np.abs(decoded).max() < 1.2
    if fmt == "flac":
        assert np.array_equal(pcm16(decoded), pcm16_of(np.concatenate([loud, -loud])))


def test_mp3_starts_with_a_lame_info_frame() -> None:
    streamed = encode("mp3", True, [speechlike(10_000)])
    info = streamed[0]
    assert info == mp3_info_frame() and len(info) == 72 * MP3_BITRATE // SAMPLE_RATE
    assert mp3_frames(info) == [info] and info[13:17] == b"Info"
    tag = 13 + 8
    assert info[tag : tag + 4] == b"LAME"
    assert int.from_bytes(info[tag + 21 : tag + 24], "big") >> 12 == LAME_ENCODER_DELAY
    assert int.from_bytes(info[tag + 34 : tag + 36], "big") == _crc16(info[: tag + 34])
    # Buffered: FFmpeg's own Xing/Info frame with the frame count, and no ID3 tag before it.
    buffered = b"".join(encode("mp3", False, [speechlike(10_000)]))
    first = mp3_frames(buffered)[0]
    assert first[13:17] == b"Info" and struct.unpack_from(">I", first, 17)[0] & 1
    # The same audio frames follow the two different first frames (minus LAME's surplus flush frames).
    s_frames, b_frames = mp3_frames(b"".join(streamed))[1:], mp3_frames(buffered)[1:]
    assert s_frames == b_frames[: len(s_frames)] and len(b_frames) - len(s_frames) <= 1


def test_ogg_opus_headers_pre_skip_and_end() -> None:
    pcm = speechlike(12_345)
    pages = ogg_pages(b"".join(encode("opus", True, chunked(pcm, [999] * 13))))
    head = pages[0][2]
    assert head[:8] == b"OpusHead"
    _version, channels, pre_skip, input_rate = struct.unpack_from("<BBHI", head, 8)
    assert (channels, input_rate) == (1, SAMPLE_RATE) and pre_skip > 0
    assert pages[1][2][:8] == b"OpusTags"
    assert pages[0][0] & 2 and not any(p[0] & 4 for p in pages[:-1]) and pages[-1][0] & 4  # BOS..EOS
    assert pages[-1][1] == pre_skip + 2 * len(pcm)  # granule at 48 kHz: decoders trim the end here


@pytest.mark.parametrize("stream", MODES)
def test_flac_streaminfo(stream: bool) -> None:
    pcm = speechlike(10_000)
    body = b"".join(encode("flac", stream, [pcm]))
    assert body[:4] == b"fLaC" and body[4] & 0x7F == 0  # STREAMINFO first
    fields = int.from_bytes(body[18:26], "big")
    rate, channels, bits = fields >> 44, (fields >> 41 & 7) + 1, (fields >> 36 & 31) + 1
    assert (rate, channels, bits) == (SAMPLE_RATE, 1, 16)
    total, md5 = fields & (2**36 - 1), body[26:42]
    # Streamed, the length and MD5 are unknown when the header goes out ("0" means unknown).
    assert (total, md5 != bytes(16)) == ((0, False) if stream else (len(pcm), True))


@pytest.mark.parametrize("fmt", FORMATS)
def test_header_is_optional_and_finished_encoder_refuses_more(fmt: str) -> None:
    pcm = speechlike(5_000)
    enc = make_encoder(fmt, stream=True)
    without_header = enc.push(pcm) + enc.flush()
    assert without_header == b"".join(encode(fmt, True, [pcm]))
    with pytest.raises(RuntimeError, match="finished"):
        enc.push(pcm)
    enc.close()  # idempotent


def test_streamed_mp3_and_opus_decode_from_a_pipe_without_a_format_hint() -> None:
    """LiveKit's decoder: ``av.open`` on a read-only stream, format probed from the bytes."""

    class Pipe:
        def __init__(self, data: bytes) -> None:
            self._data = io.BytesIO(data)

        def read(self, size: int = -1) -> bytes:
            return self._data.read(size)

    pcm = speechlike(SAMPLE_RATE)
    for fmt in ("mp3", "opus"):
        body = b"".join(encode(fmt, True, chunked(pcm, [4_800] * 5)))
        with av.open(Pipe(body)) as container:
            n = sum(frame.samples for frame in container.decode(audio=0))
        assert 0 <= n * SAMPLE_RATE // DECODED_RATE[fmt] - len(pcm) <= EXTRA[fmt][1]


def test_dropped_encoders_leave_no_threads_files_or_cycles() -> None:
    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    make_encoder("opus", True).flush()  # warm up: FFmpeg's one-time setup
    threads, files = threading.active_count(), fds()
    tasks = len(os.listdir("/proc/self/task"))
    gc.disable()
    try:
        refs = []
        for i in range(40):
            enc = make_encoder(FORMATS[i % 4], stream=i % 2 == 0)
            enc.push(speechlike(3_000))
            refs.append(weakref.ref(enc))
            if i % 3 == 0:
                enc.close()
            del enc  # abandoned mid-stream: freed by reference counting alone
        assert all(r() is None for r in refs)
    finally:
        gc.enable()
    assert threading.active_count() == threads and fds() == files
    # no native threads either (one that an earlier test in this process left idling may have ended)
    assert len(os.listdir("/proc/self/task")) <= tasks


def test_importing_formats_does_not_import_av() -> None:
    code = "import sys, app.audio.formats; assert 'av' not in sys.modules"
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True)
