"""The audio containers an upload may be, recognised from its first bytes (never from a name or type).

An upload is decoded only if its leading bytes are the signature of one container on this allow-list;
FFmpeg is then told that container by name (so it never probes), may use that demuxer and the
listed decoders only, and may open no protocol at all (the upload is read from memory through PyAV's
own I/O, which is not a protocol). Playlists and session descriptions (SDP/RTP/RTSP, concat/ffconcat,
HLS, DASH, image sequences, tee, subfile, data: URLs, ...) therefore never reach a demuxer that could
open a file or a socket, whatever the upload claims to be.

=========  ========================================  ==================================================
kind       signature                                 decoders
=========  ========================================  ==================================================
wav        ``RIFF``/``RF64``/``BW64`` ... ``WAVE``   PCM (8-64 bit, float), A-law, mu-law
flac       ``fLaC`` (after an optional ID3v2 tag)    FLAC
ogg        ``OggS``                                  Opus, Vorbis, FLAC
mp3        an ID3v2 tag or an MPEG layer III frame   MP3
mp4        ``ftyp`` box at byte 4 (m4a, mp4, mov)    AAC, ALAC, MP3, Opus, FLAC
matroska   EBML magic ``1A 45 DF A3`` (webm, mka)    Opus, Vorbis, AAC, FLAC, MP3, PCM
=========  ========================================  ==================================================
"""

from __future__ import annotations

from dataclasses import dataclass

_PCM = tuple(
    f"pcm_{kind}"
    for kind in ("s16le", "s24le", "s32le", "f32le", "f64le", "u8", "alaw", "mulaw", "s16be", "s24be")
)
_MP3 = ("mp3", "mp3float")
_AAC = ("aac", "aac_fixed")
_OPUS = ("opus", "libopus")
_VORBIS = ("vorbis", "libvorbis")


@dataclass(frozen=True)
class Container:
    """One allowed container: its FFmpeg demuxer and the decoders it may use."""

    kind: str
    demuxer: str
    decoders: tuple[str, ...]
    libsndfile: bool
    """libsndfile reads this kind too (it is tried first: it checks the duration from the header)."""


CONTAINERS: dict[str, Container] = {
    c.kind: c
    for c in (
        Container("wav", "wav", _PCM, libsndfile=True),
        Container("flac", "flac", ("flac",), libsndfile=True),
        Container("ogg", "ogg", (*_OPUS, *_VORBIS, "flac"), libsndfile=True),
        Container("mp3", "mp3", _MP3, libsndfile=True),
        Container("mp4", "mov", (*_AAC, "alac", *_MP3, *_OPUS, "flac"), libsndfile=False),
        Container("matroska", "matroska", (*_OPUS, *_VORBIS, *_AAC, "flac", *_MP3, *_PCM), libsndfile=False),
    )
}

ALLOWED_DESCRIPTION = "wav, flac, ogg (opus/vorbis), mp3, m4a/mp4 (aac/alac) or webm/mka"


def _id3_end(data: bytes) -> int:
    """Length of a leading ID3v2 tag (10-byte header + syncsafe size), or 0 when there is none."""
    if len(data) < 10 or data[:3] != b"ID3" or any(b & 0x80 for b in data[6:10]):
        return 0
    size = (data[6] << 21) | (data[7] << 14) | (data[8] << 7) | data[9]
    footer = 10 if data[5] & 0x10 else 0
    return 10 + size + footer


def _is_mp3_frame(head: bytes) -> bool:
    """An MPEG audio frame header of layer III: 11 sync bits, a valid version, bitrate and rate."""
    if len(head) < 4 or head[0] != 0xFF or head[1] & 0xE0 != 0xE0:
        return False
    version, layer = (head[1] >> 3) & 0x3, (head[1] >> 1) & 0x3
    bitrate, rate = head[2] >> 4, (head[2] >> 2) & 0x3
    return version != 1 and layer == 1 and bitrate not in (0, 15) and rate != 3


def sniff(data: bytes) -> Container | None:
    """The allowed container whose signature ``data`` starts with, or None."""
    if len(data) >= 12 and data[:4] in (b"RIFF", b"RF64", b"BW64") and data[8:12] == b"WAVE":
        return CONTAINERS["wav"]
    if data[:4] == b"OggS":
        return CONTAINERS["ogg"]
    if data[4:8] == b"ftyp":
        return CONTAINERS["mp4"]
    if data[:4] == b"\x1a\x45\xdf\xa3":
        return CONTAINERS["matroska"]
    start = _id3_end(data)
    if data[start : start + 4] == b"fLaC":
        return CONTAINERS["flac"]
    if _is_mp3_frame(data[start : start + 4]):
        return CONTAINERS["mp3"]
    return None
