"""Uploads that are not audio: playlists, session descriptions and URLs must never be opened.

Each upload here was (or would be) opened by FFmpeg's probing: an SDP file binds UDP sockets and
blocks for seconds, an ffconcat playlist reads files relative to the working directory. Only the
allow-listed containers, recognised from their bytes, may be decoded, by their own demuxer with no
protocol; everything else is the same 400, whether the files it names exist or not.
"""

from __future__ import annotations

import base64
import contextlib
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from app.audio.io import load_reference
from app.core.errors import InvalidRequest
from tests.speech_audio import transcode, wav_bytes

LIMITS = {"min_s": 1.0, "max_s": 30.0, "param": "audio_sample"}

SDP = (
    b"v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=voice\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
    b"m=audio 5004 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n"
)


@pytest.fixture
def private_wav(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """A 2 s wav named private_recording.wav in the working directory (which is ``tmp_path``)."""
    monkeypatch.chdir(tmp_path)
    data = wav_bytes(np.full(32000, 0.1), 16000)
    (tmp_path / "private_recording.wav").write_bytes(data)
    return data


def sockets_open() -> int:
    """How many sockets this process has open now."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


def refused(data: bytes) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        load_reference(data, **LIMITS)
    assert (info.value.status, info.value.param, info.value.code) == (400, "audio_sample", "invalid_audio")
    return info.value


def test_an_sdp_file_opens_no_socket_and_is_refused_at_once() -> None:
    before = sockets_open()
    most = before
    done = threading.Event()

    def watch() -> None:
        nonlocal most
        while not done.is_set():
            most = max(most, sockets_open())
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.perf_counter()
    try:
        refused(SDP)
    finally:
        elapsed = time.perf_counter() - started
        done.set()
        watcher.join()
    assert most == before, "FFmpeg opened sockets for an SDP upload"
    assert elapsed < 1.0


def test_an_ffconcat_playlist_reads_no_file_and_reveals_none(private_wav: bytes) -> None:
    load_reference(private_wav, **LIMITS)  # the file itself is fine audio
    existing = refused(b"ffconcat version 1.0\nfile private_recording.wav\n")
    missing = refused(b"ffconcat version 1.0\nfile no_such_recording.wav\n")
    assert existing.message == missing.message, "the answer must not tell which files exist"


def _data_uri(data: bytes) -> bytes:
    return b"data:audio/wav;base64," + base64.b64encode(data)


@pytest.mark.parametrize(
    ("name", "upload"),
    [
        ("hls", b"#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\nprivate_recording.wav\n"),
        ("hls_url", b"#EXTM3U\n#EXTINF:2.0,\nhttp://127.0.0.1:9/a.aac\n#EXT-X-ENDLIST\n"),
        (
            "dash",
            b'<?xml version="1.0"?><MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static">'
            b'<Period><AdaptationSet mimeType="audio/mp4"><Representation id="a" bandwidth="1">'
            b"<BaseURL>private_recording.wav</BaseURL></Representation></AdaptationSet></Period></MPD>",
        ),
        ("rtsp_sdp", SDP.replace(b"t=0 0\r\n", b"t=0 0\r\na=control:rtsp://127.0.0.1:9/voice\r\n")),
        ("concat_file_url", b"ffconcat version 1.0\nfile file:private_recording.wav\n"),
        ("concat_subfile", b"ffconcat version 1.0\nfile 'subfile,,start,0,end,0,,:private_recording.wav'\n"),
        ("concat_tee", b"ffconcat version 1.0\nfile 'tee:private_recording.wav'\n"),
        ("concat_data_uri", None),
        ("plain_data_uri", None),
        (
            "id3_then_playlist",
            b"ID3\x04\x00\x00\x00\x00\x00\x00ffconcat version 1.0\nfile private_recording.wav\n",
        ),
        ("png_image2", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64),
        ("ffmetadata", b";FFMETADATA1\ntitle=x\n"),
        ("smil", b'<smil><body><audio src="private_recording.wav"/></body></smil>'),
        ("pls", b"[playlist]\nFile1=private_recording.wav\nNumberOfEntries=1\n"),
        ("raw_pcm", np.zeros(48000, dtype=np.int16).tobytes()),
    ],
)
def test_playlists_sessions_urls_and_other_formats_are_refused(
    private_wav: bytes, name: str, upload: bytes | None
) -> None:
    if name == "concat_data_uri":
        upload = b"ffconcat version 1.0\nfile '" + _data_uri(private_wav) + b"'\n"
    elif name == "plain_data_uri":
        upload = _data_uri(private_wav)
    assert upload is not None
    started = time.perf_counter()
    refused(upload)
    assert time.perf_counter() - started < 1.0, name


def test_an_allowed_signature_in_front_of_a_playlist_is_not_a_playlist(private_wav: bytes) -> None:
    riff = b"RIFF\x24\x00\x00\x00WAVE"
    refused(riff + b"\nffconcat version 1.0\nfile private_recording.wav\n")
    refused(b"OggS" + SDP)
    refused(b"\x1a\x45\xdf\xa3" + b"ffconcat version 1.0\nfile private_recording.wav\n")


def test_webm_opus_decodes() -> None:
    import io

    import av

    source = wav_bytes(np.sin(np.arange(48000) / 10.0) * 0.3, 24000)
    out = io.BytesIO()
    with av.open(io.BytesIO(source)) as src, av.open(out, "w", format="webm") as sink:
        stream = sink.add_stream("libopus", rate=48000)
        stream.layout = "mono"
        resampler = av.AudioResampler(format=stream.format.name, layout="mono", rate=48000)
        for frame in [*src.decode(audio=0), None]:
            for converted in resampler.resample(frame):
                for packet in stream.encode(converted):
                    sink.mux(packet)
        for packet in stream.encode(None):
            sink.mux(packet)
    reference = load_reference(out.getvalue(), **LIMITS)
    assert reference.duration_s == pytest.approx(2.0, abs=0.05)


@pytest.mark.parametrize("fmt", ["wav", "m4a"])
def test_a_decode_that_passes_its_time_limit_frees_its_thread(fmt: str) -> None:
    long_wav = wav_bytes(np.sin(np.arange(16000 * 25) / 7.0) * 0.3, 16000)
    data = long_wav if fmt == "wav" else transcode(long_wav, "m4a")
    started = time.perf_counter()
    # a limit far below any decode's first block: on a fast CPU a 25 s WAV can decode within 1 ms
    with pytest.raises(InvalidRequest) as info:
        load_reference(data, **LIMITS, timeout_s=1e-6)
    assert info.value.code == "decode_timeout" and info.value.status == 400
    assert time.perf_counter() - started < 0.5
