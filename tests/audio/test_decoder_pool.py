"""ReferenceDecoder: uploads decode on their own bounded threads, never on the shared default pool."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from app.audio import decoder_pool
from app.audio.decoder_pool import ReferenceDecoder
from app.audio.io import ReferenceAudio
from app.core.errors import InvalidRequest, Unavailable
from tests.speech_audio import wav_bytes


class Blocking:
    """A stand-in for ``load_references`` that holds its thread until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.running = 0
        self.most = 0
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, data: bytes, *, rates: tuple[int, ...], **kwargs: object) -> dict[int, ReferenceAudio]:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.threads.add(threading.current_thread().name)
        self.release.wait(10)
        with self._lock:
            self.running -= 1
        return {rate: ReferenceAudio(np.zeros(rate, dtype=np.float32), "x", rate) for rate in rates}


@pytest.fixture
def blocking(monkeypatch: pytest.MonkeyPatch) -> Blocking:
    stand_in = Blocking()
    monkeypatch.setattr(decoder_pool, "load_references", stand_in)
    return stand_in


def make(threads: int = 2, timeout_s: float = 5.0) -> ReferenceDecoder:
    return ReferenceDecoder(threads=threads, timeout_s=timeout_s, min_s=1.0, max_s=30.0)


async def test_blocked_decodes_leave_the_default_pool_free(blocking: Blocking) -> None:
    decoder = make(threads=2)
    uploads = [asyncio.create_task(decoder.decode(b"x", "audio_sample")) for _ in range(6)]
    await asyncio.sleep(0.1)
    started = time.perf_counter()
    for _ in range(8):  # more jobs than the default pool has threads on a small machine
        await asyncio.gather(*(asyncio.to_thread(time.sleep, 0.01) for _ in range(8)))
    assert time.perf_counter() - started < 2.0, "the shared pool waited on upload decoding"
    assert blocking.most == 2 and all(name.startswith("upload-decode") for name in blocking.threads)
    blocking.release.set()
    assert len(await asyncio.gather(*uploads)) == 6
    decoder.close()


async def test_a_decode_that_finds_no_thread_in_time_is_503(blocking: Blocking) -> None:
    decoder = make(threads=1, timeout_s=0.2)
    first = asyncio.create_task(decoder.decode(b"x", "audio_sample"))
    await asyncio.sleep(0.05)
    with pytest.raises(Unavailable) as info:
        await decoder.decode(b"x", "audio_sample")
    assert info.value.status == 503 and info.value.headers["Retry-After"] == "1"
    blocking.release.set()
    await first
    decoder.close()


async def test_the_thread_is_the_slot_even_when_the_caller_leaves(blocking: Blocking) -> None:
    decoder = make(threads=1, timeout_s=5.0)
    caller = asyncio.create_task(decoder.decode(b"x", "audio_sample"))
    await asyncio.sleep(0.05)
    caller.cancel()
    second = asyncio.create_task(decoder.decode(b"x", "audio_sample"))
    await asyncio.sleep(0.1)
    assert blocking.running == 1 and not second.done(), "a second decode ran beside the abandoned one"
    blocking.release.set()
    assert (await second).duration_s == 1.0
    decoder.close()


async def test_real_decodes_run_and_refuse_like_load_references() -> None:
    decoder = make()
    reference = await decoder.decode(wav_bytes(np.full(24000, 0.1), 16000), "audio_sample")
    assert reference.duration_s == pytest.approx(1.5)
    with pytest.raises(InvalidRequest) as info:
        await decoder.decode(b"ffconcat version 1.0\nfile x.wav\n", "audio_sample")
    assert info.value.status == 400
    decoder.close()
