"""CodecWorker: the threads that own the codec device, one for decodes and one for encodes.

The event loop only enqueues work and awaits futures; each thread blocks on its queue, runs the
model under ``torch.inference_mode()`` and hands each result back with ``loop.call_soon_threadsafe``.
Decodes run one at a time in arrival order. Encodes get their own thread so that a long reference
(a 30 s upload takes minutes on a CPU) never holds up the decodes of streams that are playing;
encodes waiting together run as one batch, up to ``max_encode_batch``, and the encoder groups them
by padded length, so each item gets the codes it gets alone. A failing item fails only its own
future (a failing batch, its items).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from app.codec.device import set_current
from app.codec.neucodec.decoder import NeuCodecDecoder
from app.codec.neucodec.encoder import MIN_SAMPLES, NeuCodecEncoder, frames_for
from app.errors import Unavailable

MAX_ENCODE_BATCH = 8


class CodecWorkerClosed(Unavailable):
    """503: the codec worker is stopped (server shutting down) and takes no more work."""


class EncoderUnavailable(Unavailable):
    """503: this worker has no encoder (voice conversion is off)."""


@dataclass(frozen=True)
class _Decode:
    codes: list[int]  # a copy: the caller may reuse its buffer
    future: asyncio.Future[np.ndarray]


@dataclass(frozen=True)
class _Encode:
    audio: np.ndarray  # float32 [S] at 16 kHz, a copy
    future: asyncio.Future[list[int]]


_Job = _Decode | _Encode


def _resolve(future: asyncio.Future[Any], result: object) -> None:
    """Settle ``future`` on the loop thread unless it was cancelled meanwhile."""
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


class CodecWorker:
    """Sequential codec service: ``await decode(codes)`` -> audio; ``await encode(audio_16k)`` -> codes."""

    def __init__(
        self,
        decoder: NeuCodecDecoder,
        device: torch.device | str,
        *,
        encoder: NeuCodecEncoder | None = None,
        max_encode_batch: int = MAX_ENCODE_BATCH,
    ) -> None:
        if max_encode_batch < 1:
            raise ValueError(f"max_encode_batch must be >= 1, got {max_encode_batch}")
        self._decoder = decoder
        self._encoder = encoder
        self._device = torch.device(device)
        self._max_encode_batch = max_encode_batch
        self._queues: dict[type[_Job], deque[_Job]] = {_Decode: deque(), _Encode: deque()}
        self._wakeup = threading.Condition()
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._threads: list[threading.Thread] = []
        self._closed = False

    @property
    def running(self) -> bool:
        """True between ``start()`` and ``close()``."""
        return bool(self._threads) and not self._closed

    @property
    def can_encode(self) -> bool:
        """True when the worker was given an encoder."""
        return self._encoder is not None

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Start the threads; results go to ``loop`` (default: the running loop of the caller)."""
        if self._threads or self._closed:
            raise RuntimeError("CodecWorker.start() called twice or after close()")
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        kinds: list[type[_Job]] = [_Decode] + ([_Encode] if self._encoder is not None else [])
        for kind in kinds:
            name = "codec-decode" if kind is _Decode else "codec-encode"
            self._threads.append(threading.Thread(target=self._run, args=(kind,), name=name, daemon=True))
        for thread in self._threads:
            thread.start()

    def _submit(self, job: _Job) -> None:
        with self._wakeup:
            self._queues[type(job)].append(job)
            self._wakeup.notify_all()

    def _check_running(self) -> asyncio.AbstractEventLoop:
        if not self.running or self._loop is None:  # _loop is set whenever running
            raise CodecWorkerClosed("the codec worker is not running")
        return self._loop

    async def decode(self, codes: Sequence[int]) -> np.ndarray:
        """Decode speech codes to float32 audio of shape ``(len(codes) * hop_length,)``.

        Raises ValueError for codes out of range, CodecWorkerClosed once ``close()`` has begun.
        Cancelling the caller before the thread reaches the item skips its computation.
        """
        loop = self._check_running()
        if len(codes) == 0:
            return np.zeros(0, dtype=np.float32)
        future: asyncio.Future[np.ndarray] = loop.create_future()
        self._submit(_Decode(list(codes), future))
        return await future

    async def encode(self, audio_16k: np.ndarray) -> list[int]:
        """Encode mono 16 kHz audio ``(S,)`` to ``S // 320`` speech codes in [0, codebook_size).

        Raises EncoderUnavailable without an encoder, ValueError for audio that is not 1-D, shorter
        than 320 samples (20 ms) or not finite, CodecWorkerClosed once ``close()`` has begun.
        Cancelling the caller before the thread reaches the item skips its computation.
        """
        if self._encoder is None:
            raise EncoderUnavailable("speech encoding is not available: the codec encoder is not loaded")
        loop = self._check_running()
        audio = np.array(audio_16k, dtype=np.float32)  # a copy, like decode's codes
        if audio.ndim != 1 or audio.shape[0] < MIN_SAMPLES:
            raise ValueError(f"audio must be 1-D with at least {MIN_SAMPLES} samples, got {audio.shape}")
        future: asyncio.Future[list[int]] = loop.create_future()
        self._submit(_Encode(audio, future))
        return await future

    async def close(self) -> None:
        """Stop taking work, fail queued items, let the current items finish and join the threads."""
        if not self._closed:
            self._closed = True
            with self._wakeup:
                pending = [job for queue in self._queues.values() for job in queue]
                for queue in self._queues.values():
                    queue.clear()
                self._stopping = True
                self._wakeup.notify_all()
            for job in pending:
                kind = "decode" if isinstance(job, _Decode) else "encode"
                _resolve(job.future, CodecWorkerClosed(f"the codec worker stopped before this {kind} ran"))
        for thread in self._threads:  # every caller returns only once the threads have ended
            await asyncio.to_thread(thread.join)

    def _next(self, kind: type[_Job]) -> list[_Job] | None:
        """Block for work of ``kind``: one decode, or the encodes waiting (up to a batch); None to stop."""
        queue = self._queues[kind]
        limit = self._max_encode_batch if kind is _Encode else 1
        with self._wakeup:
            while not queue and not self._stopping:
                self._wakeup.wait()
            if not queue:
                return None
            return [queue.popleft() for _ in range(min(limit, len(queue)))]

    def _decode_now(self, codes: list[int]) -> np.ndarray:
        """Run one decode on the worker thread: ``[T]`` codes -> ``(T * hop,)`` float32 on cpu."""
        batch = torch.tensor([codes], dtype=torch.long)  # [1, T]
        audio = self._decoder.decode(batch)  # [1, T * hop]
        return audio[0].to(device="cpu", dtype=torch.float32).numpy()

    def _encode_now(self, jobs: list[_Encode]) -> list[list[int] | BaseException]:
        """Encode several waveforms in one call; a non-finite item fails alone, before the batch runs."""
        assert self._encoder is not None  # encode() admits no job without one
        results: list[list[int] | BaseException] = []
        runnable: list[int] = []
        for index, job in enumerate(jobs):
            if np.isfinite(job.audio).all():
                runnable.append(index)
                results.append([])
            else:
                results.append(ValueError("audio contains NaN or infinite samples"))
        if not runnable:
            return results
        lengths = [jobs[i].audio.shape[0] for i in runnable]
        batch = torch.zeros(len(runnable), 1, max(lengths))  # [B, 1, S]; the encoder reads only lengths[i]
        for row, index in enumerate(runnable):
            batch[row, 0, : lengths[row]] = torch.from_numpy(jobs[index].audio)
        try:
            codes = self._encoder.encode(batch, lengths)  # [B, F] on cpu
        except Exception as exc:
            return [exc if i in runnable else result for i, result in enumerate(results)]
        for row, index in enumerate(runnable):
            results[index] = codes[row, : frames_for(lengths[row])].tolist()
        return results

    def _compute(self, batch: list[_Job]) -> list[object]:
        """Results (or exceptions) for ``batch``, in order."""
        if isinstance(batch[0], _Decode):
            try:
                return [self._decode_now(batch[0].codes)]
            except Exception as exc:
                return [exc]
        return list(self._encode_now([job for job in batch if isinstance(job, _Encode)]))

    def _run(self, kind: type[_Job]) -> None:
        assert self._loop is not None
        set_current(self._device)
        with torch.inference_mode():
            while True:
                batch = self._next(kind)
                if batch is None:
                    return
                batch = [job for job in batch if not job.future.cancelled()]  # a plain state read
                if not batch:
                    continue
                for job, result in zip(batch, self._compute(batch), strict=True):
                    try:
                        self._loop.call_soon_threadsafe(_resolve, job.future, result)
                    except RuntimeError:  # the loop is closed: nobody is waiting any more
                        return
