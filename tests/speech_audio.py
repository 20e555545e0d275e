"""Real speech for tests: espeak-ng at test time, transcoded with PyAV (no downloaded files)."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import av
import numpy as np

# container, codec, sample rate of the encoded stream (opus only takes 8/12/16/24/48 kHz)
FORMATS: dict[str, tuple[str, str, int | None]] = {
    "flac": ("flac", "flac", None),
    "ogg": ("ogg", "libopus", 48000),
    "mp3": ("mp3", "libmp3lame", None),
    "m4a": ("mp4", "aac", None),  # not readable by libsndfile: the PyAV path
}


def espeak_wav(path: Path, text: str, voice: str | None = None) -> Path:
    """Write ``text`` spoken by espeak-ng (22.05 kHz mono 16-bit wav; its default voice unless
    ``voice``, e.g. ``ms``, ``ta``, ``cmn``) to ``path``."""
    command = ["espeak-ng", "-w", str(path), *(["-v", voice] if voice else []), text]
    subprocess.run(command, check=True, capture_output=True)
    return path


def transcode(wav: bytes, fmt: str) -> bytes:
    """``wav`` re-encoded as ``fmt`` (flac, ogg = Ogg/Opus, mp3, m4a = AAC in MP4)."""
    container_name, codec_name, rate = FORMATS[fmt]
    out = io.BytesIO()
    with av.open(io.BytesIO(wav)) as source, av.open(out, mode="w", format=container_name) as sink:
        in_stream = source.streams.audio[0]
        stream = sink.add_stream(codec_name, rate=rate or in_stream.rate)
        stream.layout = "mono"
        resampler = av.AudioResampler(format=stream.format.name, layout="mono", rate=stream.rate)
        for frame in [*source.decode(in_stream), None]:
            for converted in resampler.resample(frame):
                for packet in stream.encode(converted):
                    sink.mux(packet)
        for packet in stream.encode(None):
            sink.mux(packet)
    return out.getvalue()


def wav_bytes(samples: np.ndarray, rate: int) -> bytes:
    """float samples ``(n,)`` or ``(n, channels)`` as a 16-bit wav file."""
    import soundfile as sf

    out = io.BytesIO()
    sf.write(out, samples, rate, format="WAV", subtype="PCM_16")
    return out.getvalue()
