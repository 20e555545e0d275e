"""What one upload decode may allocate: what a file declares is checked before decoding, the audio is
downmixed and resampled block by block, and the memory of the worst uploads at the size cap stays within
the bound ``app.audio.io`` states (and is given back)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import av
import numpy as np
import pytest
import soundfile as sf

from app.audio.io import BLOCK_SAMPLES, MAX_CHANNELS, load_references
from app.core.errors import InvalidRequest

RATES = (16_000, 24_000)  # NeuCodec's and MOSS's: what a registration decodes to
MAX_S = 30.0
UPLOAD_CAP = 20 * 1024 * 1024  # MAX_UPLOAD_BYTES' default
BOUND = 2 * MAX_S * sum(RATES) * 4 + 4 * BLOCK_SAMPLES * 4
"""The module docstring's bound: the mono outputs (twice while joined) and a few blocks (13.8 MB)."""


def flac(channels: int, rate: int, seconds: float) -> bytes:
    out = io.BytesIO()
    sf.write(out, np.zeros((int(rate * seconds), channels), np.int16), rate, format="FLAC")
    return out.getvalue()


def wav_at_the_cap() -> bytes:
    """8 channels of 16-bit 44.1 kHz audio, 28 s: just under the upload cap."""
    out = io.BytesIO()
    samples = np.zeros((28 * 44100, 8), np.int16)
    samples[::50, 0] = 1000
    sf.write(out, samples, 44100, format="WAV", subtype="PCM_16")
    return out.getvalue()


def aac_5_1(seconds: float) -> bytes:
    """5.1 AAC in MP4 at 48 kHz (the FFmpeg path)."""
    out = io.BytesIO()
    with av.open(out, mode="w", format="mp4") as sink:
        stream = sink.add_stream("aac", rate=48000)
        stream.layout = "5.1"
        for index in range(int(48000 * seconds) // 1024):
            frame = av.AudioFrame.from_ndarray(np.zeros((6, 1024), np.float32), format="fltp", layout="5.1")
            frame.sample_rate, frame.pts = 48000, index * 1024
            for packet in stream.encode(frame):
                sink.mux(packet)
        for packet in stream.encode(None):
            sink.mux(packet)
    return out.getvalue()


WORST = {
    "flac_8ch_192k_30s": lambda: flac(8, 192_000, MAX_S),
    "wav_8ch_at_the_cap": wav_at_the_cap,
    "aac_5.1_48k_30s": lambda: aac_5_1(MAX_S),
}


def decode(data: bytes) -> dict[int, float]:
    references = load_references(
        data, min_s=1.0, max_s=MAX_S, param="audio_sample", rates=RATES, timeout_s=60
    )
    return {rate: reference.duration_s for rate, reference in references.items()}


@pytest.mark.parametrize("name", sorted(WORST))
def test_the_worst_uploads_decode_within_the_stated_bound_and_give_it_back(name: str) -> None:
    data = WORST[name]()
    assert len(data) <= UPLOAD_CAP
    tracemalloc.start()
    try:
        durations = decode(data)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"{name}: {len(data)} bytes, peak {peak / 1e6:.1f} MB (bound {BOUND / 1e6:.1f} MB)")
    assert set(durations) == set(RATES) and all(
        abs(d - durations[RATES[0]]) < 1e-3 for d in durations.values()
    )
    assert durations[RATES[0]] > 27
    assert peak <= BOUND, f"{peak / 1e6:.0f} MB"
    assert current < 1e6, "the decode's memory is given back"


def _flac_header_only(channels: int, rate: int) -> bytes:
    return flac(channels, rate, 2.0)


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda: _flac_header_only(8, 655_350), "655350 Hz"),
        (lambda: _flac_header_only(1, 2_000), "2000 Hz"),
        (lambda: _vorbis(255, 8000, 1.2), "255 channels"),
        (lambda: _wav(MAX_CHANNELS + 1), "9 channels"),
    ],
    ids=["flac_655k", "flac_2k", "vorbis_255ch", "wav_9ch"],
)
def test_what_a_file_declares_is_refused_before_anything_is_decoded(make: object, why: str) -> None:
    data = make()  # type: ignore[operator]
    tracemalloc.start()
    try:
        started = time.perf_counter()
        with pytest.raises(InvalidRequest) as info:
            decode(data)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (info.value.status, info.value.code, info.value.param) == (400, "invalid_audio", "audio_sample")
    assert why in info.value.message
    assert peak < 1e6 and elapsed < 0.5, (peak, elapsed)


def _vorbis(channels: int, rate: int, seconds: float) -> bytes:
    out = io.BytesIO()
    sf.write(out, np.zeros((int(rate * seconds), channels), np.float32), rate, format="OGG", subtype="VORBIS")
    return out.getvalue()


def _wav(channels: int) -> bytes:
    out = io.BytesIO()
    sf.write(out, np.zeros((16000 * 2, channels), np.int16), 16000, format="WAV", subtype="PCM_16")
    return out.getvalue()


CHILD = """
import json, sys
from pathlib import Path
from app.audio.io import load_references
def peak_mb():  # this process image's peak resident memory (ru_maxrss would count the forking parent's)
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 1024
def decode(path):
    data = Path(path).read_bytes()
    load_references(data, min_s=1.0, max_s=30.0, param="x", rates=(16000, 24000), timeout_s=60)
decode(sys.argv[2])
before = peak_mb()
decode(sys.argv[1])
print(json.dumps({"before": before, "after": peak_mb()}))
"""


def test_the_process_peak_memory_of_the_worst_decode_stays_near_the_bound(tmp_path: Path) -> None:
    """The same bound seen from outside (resident memory of a fresh process, the decoders' own buffers
    included): a decode of 8 channels at 192 kHz for 30 s once held 370 MB."""
    worst, warm = tmp_path / "worst.flac", tmp_path / "warm.flac"
    worst.write_bytes(WORST["flac_8ch_192k_30s"]())
    warm.write_bytes(flac(1, 16_000, 2.0))
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(worst), str(warm)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    usage = json.loads(run.stdout)
    grown = usage["after"] - usage["before"]
    print(f"peak resident memory grew {grown:.1f} MB")
    assert grown < BOUND / 1e6 + 16, usage
