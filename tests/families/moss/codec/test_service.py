"""MossCodecService: concurrent streams batched through the codec Batcher (exact, joining and leaving),
the live-stream bound, state freed on close, broken and closed streams, batched and cached encodes."""

from __future__ import annotations

import asyncio
import io
import random
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
import torch

from app.audio.io import load_reference
from app.codec.batcher import BatcherClosed
from app.core.errors import InvalidRequest
from app.families.moss.codec.loading import load_codec
from app.families.moss.codec.model import MossAudioCodec
from app.families.moss.codec.service import (
    EncoderUnavailable,
    MossCodecOptions,
    MossCodecService,
    StreamBroken,
    StreamClosed,
    TooManyStreams,
)

TOL = 1e-5


@pytest.fixture
async def service(tiny_moss: MossAudioCodec) -> AsyncIterator[MossCodecService]:
    svc = MossCodecService(tiny_moss, "cpu", options=MossCodecOptions(max_streams=3, window_s=0.03))
    svc.start()
    yield svc
    await svc.close()


def _codes(frames: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1024, size=(frames, 16))


async def _play(
    service: MossCodecService,
    codes: np.ndarray,
    seed: int,
    after: asyncio.Event | None = None,
    progress: asyncio.Event | None = None,
    closed: asyncio.Event | None = None,
) -> np.ndarray:
    """Open a stream once ``after`` is set, decode ``codes`` in random chunks (``progress`` set after the
    third), close it (then set ``closed``)."""
    if after is not None:
        await after.wait()
    rng, stream, pieces, start = random.Random(seed), service.open_stream(), [], 0
    try:
        while start < codes.shape[0]:
            size = rng.randint(1, 4)
            pieces.append(await stream.decode(codes[start : start + size]))
            start += size
            if progress is not None and len(pieces) == 3:
                progress.set()
    finally:
        stream.close()
        if closed is not None:
            closed.set()
    return np.concatenate(pieces)


async def test_concurrent_streams_are_batched_exactly(
    service: MossCodecService, tiny_moss: MossAudioCodec
) -> None:
    # a and b start together; c joins once a has played 3 chunks; b leaves early and d takes its slot
    codes = {
        name: _codes(n, seed=i) for i, (name, n) in enumerate([("a", 30), ("b", 8), ("c", 16), ("d", 12)])
    }
    a_progress, b_closed = asyncio.Event(), asyncio.Event()
    results = await asyncio.gather(
        _play(service, codes["a"], seed=0, progress=a_progress),
        _play(service, codes["b"], seed=1, closed=b_closed),
        _play(service, codes["c"], seed=2, after=a_progress),
        _play(service, codes["d"], seed=3, after=b_closed),
    )
    for name, audio in zip(codes, results, strict=True):
        assert audio.dtype == np.float32 and audio.shape == (codes[name].shape[0] * 1920,)
        expected = tiny_moss.decode(torch.from_numpy(codes[name])).numpy()
        assert np.abs(audio - expected).max() <= TOL, name
    sizes = service.decode_batcher.stats.sizes
    assert max(sizes) >= 2, sizes  # chunks of several streams went through one forward
    assert service.live_streams == 0


async def test_the_live_stream_bound(service: MossCodecService) -> None:
    streams = [service.open_stream() for _ in range(3)]
    assert service.live_streams == 3 and all(s.state_bytes > 0 for s in streams)
    with pytest.raises(TooManyStreams, match="MOSS_CODEC_MAX_STREAMS=3") as info:
        service.open_stream()
    assert info.value.status == 503
    streams[1].close()
    assert streams[1].state_bytes == 0 and service.live_streams == 2
    streams[1].close()  # idempotent
    replacement = service.open_stream()
    assert (await replacement.decode(_codes(2, seed=0))).shape == (3840,)
    with pytest.raises(StreamClosed):
        await streams[1].decode(_codes(1, seed=0))


async def test_a_waiting_part_gets_the_next_free_stream_before_new_requests(
    service: MossCodecService,
) -> None:
    streams = [service.open_stream() for _ in range(3)]
    first = asyncio.create_task(service.open_stream_soon())
    second = asyncio.create_task(service.open_stream_soon())
    await asyncio.sleep(0)
    assert not first.done() and not second.done()  # every stream is taken: they wait, in order
    streams[0].close()
    with pytest.raises(TooManyStreams):
        service.open_stream()  # the freed stream is promised to the first waiter
    opened = await asyncio.wait_for(first, 1.0)
    assert service.live_streams == 3 and not second.done()
    assert (await opened.decode(_codes(2, seed=0))).shape == (3840,)
    second.cancel()  # a waiter that leaves takes no slot with it
    with pytest.raises(asyncio.CancelledError):
        await second
    opened.close()
    again = service.open_stream()
    assert service.live_streams == 3
    for stream in [again, *streams[1:]]:
        stream.close()


async def test_a_waiter_cancelled_after_its_stream_was_freed_passes_it_on(
    service: MossCodecService,
) -> None:
    streams = [service.open_stream() for _ in range(3)]
    doomed = asyncio.create_task(service.open_stream_soon())
    patient = asyncio.create_task(service.open_stream_soon())
    await asyncio.sleep(0)
    streams[0].close()  # handed to ``doomed``, which is cancelled before it resumes
    doomed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await doomed
    opened = await asyncio.wait_for(patient, 1.0)
    assert service.live_streams == 3
    for stream in [opened, *streams[1:]]:
        stream.close()
    assert service.live_streams == 0 and service.open_stream() is not None


async def test_bad_codes_leave_the_stream_usable(
    service: MossCodecService, tiny_moss: MossAudioCodec
) -> None:
    stream = service.open_stream()
    for bad, message in [
        (np.zeros((2, 33), dtype=np.int64), "codebooks"),
        (np.zeros(5, dtype=np.int64), "codebooks"),
        (np.full((2, 16), 1024), r"\[0, 1024\)"),
        (np.zeros((2, 16), dtype=np.float32), "integers"),
    ]:
        with pytest.raises(ValueError, match=message):
            await stream.decode(bad)
    codes = _codes(3, seed=4)
    assert (await stream.decode(codes[:0])).shape == (0,)
    audio = np.concatenate([await stream.decode(codes[:1]), await stream.decode(codes[1:])])
    assert np.abs(audio - tiny_moss.decode(torch.from_numpy(codes)).numpy()).max() <= TOL


async def test_a_lost_chunk_breaks_the_stream(service: MossCodecService) -> None:
    stream = service.open_stream()
    await service.decode_batcher.close()
    with pytest.raises(BatcherClosed):
        await stream.decode(_codes(1, seed=0))
    with pytest.raises(StreamBroken):
        await stream.decode(_codes(1, seed=0))


async def test_close_frees_every_stream(tiny_moss: MossAudioCodec) -> None:
    svc = MossCodecService(tiny_moss, "cpu", options=MossCodecOptions(max_streams=2))
    svc.start()
    streams = [svc.open_stream() for _ in range(2)]
    await svc.close()
    assert svc.live_streams == 0 and all(s.closed and s.state_bytes == 0 for s in streams)


async def test_encodes_are_batched(service: MossCodecService, tiny_moss: MossAudioCodec) -> None:
    rng = np.random.default_rng(3)
    clips = [(rng.standard_normal(1920 * n + 700) * 0.3).astype(np.float32) for n in (4, 9, 6)]
    codes = await asyncio.gather(*(service.encode(clip) for clip in clips))
    for clip, got in zip(clips, codes, strict=True):
        alone = tiny_moss.encode([torch.from_numpy(clip)], 16)[0].numpy()
        assert got.shape == (clip.shape[0] // 1920, 16) and np.array_equal(got, alone)
    assert max(service.encode_batcher.stats.sizes) >= 2
    with pytest.raises(ValueError, match="at least 1920"):
        await service.encode(clips[0][:1000])


async def test_decode_only_service_refuses_encodes(tiny_moss_dir: Path) -> None:
    svc = MossCodecService(load_codec(str(tiny_moss_dir), with_encoder=False), "cpu")
    svc.start()
    try:
        assert not svc.can_encode
        with pytest.raises(EncoderUnavailable):
            await svc.encode(np.zeros(4000, dtype=np.float32))
        stream = svc.open_stream()
        assert (await stream.decode(_codes(1, seed=0))).shape == (1920,)
    finally:
        await svc.close()


def test_reference_upload_is_resampled_to_24k() -> None:
    import soundfile as sf

    buffer = io.BytesIO()
    tone = 0.3 * np.sin(2 * np.pi * 220 * np.arange(24000) / 16000).astype(np.float32)
    sf.write(buffer, np.stack([tone, tone], axis=1), 16000, format="WAV")  # 1.5 s stereo at 16 kHz
    reference = load_reference(buffer.getvalue(), min_s=1.0, max_s=30.0, param="voice", rate=24000)
    assert reference.samples.dtype == np.float32 and reference.samples.shape == (36000,)
    assert reference.duration_s == pytest.approx(1.5) and len(reference.digest) == 64
    with pytest.raises(InvalidRequest, match="shorter than 2 s"):
        load_reference(buffer.getvalue(), min_s=2.0, max_s=30.0, param="voice", rate=24000)
