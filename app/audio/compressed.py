"""Compressed response formats (mp3, opus, aac, flac) through PyAV's bundled FFmpeg encoders.

One class, ``AvEncoder``, drives any of them: PCM is cut into frames of exactly the codec's frame size
(so the bytes never depend on how the input was chunked), each frame is encoded and muxed, and the
muxer writes into an in-memory sink. Streamed, the sink cannot seek and is drained after every call;
every muxed packet is flushed at once, so each ``push`` returns whole frames (mp3, aac, flac) or
whole Ogg pages (opus). Buffered, the sink is a seekable ``BytesIO``, so muxers that rewrite their
header at the end do so (mp3: a Xing/LAME frame with the exact length; flac: STREAMINFO with the
sample count and MD5) and ``flush`` returns the whole file.

Decoded lengths (input N samples at 24 kHz):
- flac: exactly N. opus: exactly N (decoders output 48 kHz; the pre-skip and the end granule trim).
- mp3 buffered: N to N + 46 (FFmpeg's Xing/LAME frame: delay, end padding and frame count).
- mp3 streamed: N plus less than one frame (576 samples) at the end, in FFmpeg. A LAME tag sent in
  ``header()`` carries the encoder delay, so FFmpeg trims the start exactly (mpg123 does not without
  a frame count: +1105 there); the end padding cannot be known, and the frames LAME appends past the
  decoded end of the audio are dropped.
- aac (ADTS): N plus the 1024-sample encoder priming plus less than a frame (1024). ADTS cannot
  signal the priming, so every decoder plays ~43 ms of near-silence first.
An encoder that gets no audio at all still writes one sample of silence for the formats whose
decoders reject a stream without audio frames (mp3, opus, aac).

``import av`` (~120 ms) happens on first use, in whichever thread runs the encoder.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from app.core.constants import SAMPLE_RATE

if TYPE_CHECKING:
    import av

MP3_BITRATE = 64_000  # MPEG-2 Layer III (24 kHz), mono, CBR
OPUS_BITRATE = 32_000
AAC_BITRATE = 64_000  # AAC-LC in ADTS
# Ogg page length: a page is written once it holds this much audio. Longer pages cost latency,
# shorter ones overhead (~28 bytes a page, 80 bytes a 20 ms packet at 32 kbit/s).
OGG_PAGE_DURATION_MS = 40

# libmp3lame's encoder delay (written in the LAME tag) and the MPEG audio decoder's filterbank delay:
# input sample i is decoded at position i + 576 + 529.
LAME_ENCODER_DELAY = 576
MP3_DECODER_DELAY = 529
# MPEG-2 (LSF) Layer III bitrates in kbit/s by header index; 24 kHz is sampling-rate index 1.
_MPEG2_L3_KBPS = (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160)


@dataclass(frozen=True)
class CodecSpec:
    """How to make one format: FFmpeg codec and muxer, sample format and options."""

    media_type: str
    codec: str
    container: str
    sample_format: str  # FFmpeg name: "fltp", "flt" or "s16"
    bit_rate: int = 0  # 0: the codec's own choice (lossless)
    empty_ok: bool = False  # decoders accept a stream without audio frames
    codec_options: dict[str, str] = field(default_factory=dict)
    container_options: dict[str, str] = field(default_factory=dict)


SPECS: dict[str, CodecSpec] = {
    "mp3": CodecSpec(
        "audio/mpeg", "libmp3lame", "mp3", "fltp", MP3_BITRATE, container_options={"id3v2_version": "0"}
    ),
    "opus": CodecSpec(
        "audio/ogg",
        "libopus",
        "ogg",
        "flt",
        OPUS_BITRATE,
        codec_options={"application": "audio"},
        container_options={"page_duration": str(OGG_PAGE_DURATION_MS * 1000)},
    ),
    "aac": CodecSpec("audio/aac", "aac", "adts", "fltp", AAC_BITRATE),
    "flac": CodecSpec(
        "audio/flac",
        "flac",
        "flac",
        "s16",
        empty_ok=True,
        container_options={"metadata_header_padding": "0"},
    ),
}

# Every muxer flushes each packet to the sink as it is written. Muxers and codecs write no random or
# version-dependent bytes (Ogg serial number, "Lavc"/"Lavf" strings): equal input gives equal output.
_COMMON_CONTAINER_OPTIONS = {"flush_packets": "1", "fflags": "+bitexact"}
_COMMON_CODEC_OPTIONS = {"flags": "+bitexact"}


def mp3_info_frame(bit_rate: int = MP3_BITRATE, encoder_delay: int = LAME_ENCODER_DELAY) -> bytes:
    """A silent MPEG-2 Layer III frame (24 kHz mono) holding an "Info" header with a LAME tag.

    Only the encoder delay is set (no frame count, byte count or TOC, which a stream cannot know).
    FFmpeg (PyAV, so LiveKit) skips the frame and trims the delay; mpg123 (libsndfile) skips the frame
    but trims only when it knows the length; a decoder that ignores the tag plays 24 ms of silence.
    """
    index = _MPEG2_L3_KBPS.index(bit_rate // 1000)
    frame = bytearray(72 * bit_rate // SAMPLE_RATE)  # 72 * bitrate / rate bytes, no padding slot
    # sync, MPEG-2, Layer III, no CRC | bitrate index, 24 kHz, no padding | mono
    frame[0:4] = bytes((0xFF, 0xF3, index << 4 | 0x04, 0xC0))
    pos = 4 + 9  # after the 9 bytes of mono MPEG-2 side info (zero: an empty frame)
    frame[pos : pos + 8] = b"Info" + bytes(4)  # CBR stream, flags 0: no optional fields
    pos += 8
    tag = pos
    frame[tag : tag + 9] = b"LAME3.100"
    frame[tag + 9] = 0x01  # tag revision 0, CBR
    frame[tag + 20] = min(bit_rate // 1000, 255)  # bitrate (kbit/s)
    frame[tag + 21 : tag + 24] = (encoder_delay << 12).to_bytes(3, "big")  # delay, end padding 0
    crc_at = tag + 34
    frame[crc_at : crc_at + 2] = _crc16(bytes(frame[:crc_at])).to_bytes(2, "big")
    return bytes(frame)


def _crc16(data: bytes) -> int:
    """CRC-16/ARC (polynomial 0xA001 reflected), as the LAME tag's "Info Tag CRC" uses."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


class _Sink:
    """Write-only, non-seekable byte sink for a streamed muxer; ``take`` empties it."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def write(self, data: bytes) -> int:
        self._buf += data
        return len(data)

    def take(self) -> bytes:
        out = bytes(self._buf)
        self._buf.clear()
        return out


class AvEncoder:
    """A compressed format through a PyAV encoder and muxer; ``stream`` selects streamed or buffered.

    Nothing is opened until the first call. ``flush`` finishes and releases everything; an abandoned
    encoder holds only memory (no threads, no file handles) and is freed when dropped, or at once by
    ``close()``.
    """

    def __init__(self, spec: CodecSpec, stream: bool) -> None:
        self.media_type = spec.media_type
        self._spec = spec
        self._streamed = stream
        self._sink: _Sink | io.BytesIO = _Sink() if stream else io.BytesIO()
        self._container: av.container.OutputContainer | None = None
        self._audio: av.audio.stream.AudioStream | None = None
        self._pending = np.zeros(0, np.float32)
        self._pts = 0  # samples encoded so far
        self._packets = 0  # packets muxed so far
        self._finished = False

    def header(self) -> bytes:
        self._start()
        return self._take()

    def push(self, pcm: np.ndarray) -> bytes:
        self._start()
        pcm = np.clip(np.asarray(pcm, np.float32).reshape(-1), -1.0, 1.0)
        buf = np.concatenate((self._pending, pcm)) if self._pending.size else pcm
        size = self._frame_size
        whole = len(buf) - len(buf) % size
        for start in range(0, whole, size):
            self._mux(self._encode(buf[start : start + size]))
        self._pending = buf[whole:].copy()
        return self._take()

    def flush(self) -> bytes:
        self._start()
        if self._pts + self._pending.size == 0 and not self._spec.empty_ok:
            self._pending = np.zeros(1, np.float32)
        if self._pending.size:
            self._mux(self._encode(self._pending))  # a short last frame; every codec here takes one
            self._pending = np.zeros(0, np.float32)
        tail = self._encode(None)
        if self._streamed and self._spec.codec == "libmp3lame":
            # Frames that decode entirely after the audio's end: only LAME's flush padding.
            delay = LAME_ENCODER_DELAY + MP3_DECODER_DELAY
            needed = -(-(delay + self._pts) // self._frame_size)
            tail = tail[: max(needed - self._packets, 0)]
        self._mux(tail)
        self.close()  # writes the trailer
        return self._sink.getvalue() if isinstance(self._sink, io.BytesIO) else self._take()

    def close(self) -> None:
        """Release the codec and muxer now (``flush`` does it too); nothing more can be encoded."""
        if self._container is not None:
            self._container.close()
            self._container = self._audio = None
        self._finished = True

    @property
    def _frame_size(self) -> int:
        assert self._audio is not None
        return self._audio.codec_context.frame_size

    def _start(self) -> None:
        if self._finished:
            raise RuntimeError("encoder is finished")
        if self._container is not None:
            return
        import av  # ~120 ms on first import: kept out of module import

        spec = self._spec
        if self._streamed and spec.codec == "libmp3lame":
            self._sink.write(mp3_info_frame(spec.bit_rate))
        options = _COMMON_CONTAINER_OPTIONS | spec.container_options
        container = av.open(self._sink, "w", format=spec.container, container_options=options)
        try:
            codec_options = _COMMON_CODEC_OPTIONS | spec.codec_options
            audio = container.add_stream(spec.codec, rate=SAMPLE_RATE, options=codec_options)
            assert isinstance(audio, av.AudioStream)  # an audio codec makes an audio stream
            ctx = audio.codec_context
            ctx.layout = "mono"
            ctx.format = spec.sample_format
            ctx.thread_count = 1  # no codec worker threads
            if spec.bit_rate:
                ctx.bit_rate = spec.bit_rate
            container.start_encoding()  # opens the codec (frame_size known) and writes the header
        except BaseException:
            container.close()
            raise
        self._container, self._audio = container, audio

    def _encode(self, samples: np.ndarray | None) -> list[av.Packet]:
        """Encode one frame of float32 samples; ``None`` drains the codec."""
        import av

        assert self._audio is not None
        frame = None
        if samples is not None:
            fmt = self._spec.sample_format
            data = np.rint(samples * 32767).astype(np.int16) if fmt == "s16" else samples
            frame = av.AudioFrame.from_ndarray(data[np.newaxis, :], format=fmt, layout="mono")
            frame.sample_rate = SAMPLE_RATE
            frame.time_base = Fraction(1, SAMPLE_RATE)
            frame.pts = self._pts
            self._pts += len(samples)
        return self._audio.encode(frame)

    def _mux(self, packets: list[av.Packet]) -> None:
        assert self._container is not None
        self._container.mux(packets)
        self._packets += len(packets)

    def _take(self) -> bytes:
        return self._sink.take() if isinstance(self._sink, _Sink) else b""
