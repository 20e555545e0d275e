"""CodecWorker: one thread owns the codec device and decodes requests one at a time.

The event loop only enqueues work and awaits futures; the thread blocks on the queue, runs the
decoder under ``torch.inference_mode()`` and hands each result back with
``loop.call_soon_threadsafe``. A failing item fails only its own future.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from app.codec.device import set_current
from app.codec.neucodec.decoder import NeuCodecDecoder
from app.errors import Unavailable


class CodecWorkerClosed(Unavailable):
    """503: the codec worker is stopped (server shutting down) and takes no more decodes."""


@dataclass(frozen=True)
class _Job:
    codes: list[int]  # a copy: the caller may reuse its buffer
    future: asyncio.Future[np.ndarray]


def _resolve(future: asyncio.Future[np.ndarray], result: np.ndarray | BaseException) -> None:
    """Settle ``future`` on the loop thread unless it was cancelled meanwhile."""
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


class CodecWorker:
    """Sequential decode service: ``await decode(codes)`` -> float32 audio of ``len(codes) * hop``."""

    def __init__(self, decoder: NeuCodecDecoder, device: torch.device | str) -> None:
        self._decoder = decoder
        self._device = torch.device(device)
        self._queue: queue.Queue[_Job | None] = queue.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def running(self) -> bool:
        """True between ``start()`` and ``close()``."""
        return self._thread is not None and not self._closed

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Start the thread; results go to ``loop`` (default: the running loop of the caller)."""
        if self._thread is not None or self._closed:
            raise RuntimeError("CodecWorker.start() called twice or after close()")
        self._loop = loop if loop is not None else asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._run, name="codec-worker", daemon=True)
        self._thread.start()

    async def decode(self, codes: Sequence[int]) -> np.ndarray:
        """Decode speech codes to float32 audio of shape ``(len(codes) * hop_length,)``.

        Raises ValueError for codes out of range, CodecWorkerClosed once ``close()`` has begun.
        Cancelling the caller before the thread reaches the item skips its computation.
        """
        if not self.running or self._loop is None:  # _loop is set whenever running
            raise CodecWorkerClosed("the codec worker is not running")
        if len(codes) == 0:
            return np.zeros(0, dtype=np.float32)
        future: asyncio.Future[np.ndarray] = self._loop.create_future()
        self._queue.put(_Job(list(codes), future))
        return await future

    async def close(self) -> None:
        """Stop taking work, fail queued items, let the current item finish and join the thread."""
        if not self._closed:
            self._closed = True
            while True:
                try:
                    job = self._queue.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    _resolve(job.future, CodecWorkerClosed("the codec worker stopped before this decode ran"))
            self._queue.put(None)
        if self._thread is not None:  # every caller returns only once the thread has ended
            await asyncio.to_thread(self._thread.join)

    def _decode_now(self, codes: list[int]) -> np.ndarray:
        """Run one decode on the worker thread: ``[T]`` codes -> ``(T * hop,)`` float32 on cpu."""
        batch = torch.tensor([codes], dtype=torch.long)  # [1, T]
        audio = self._decoder.decode(batch)  # [1, T * hop]
        return audio[0].to(device="cpu", dtype=torch.float32).numpy()

    def _run(self) -> None:
        assert self._loop is not None
        set_current(self._device)
        with torch.inference_mode():
            while True:
                job = self._queue.get()
                if job is None:
                    return
                if job.future.cancelled():  # a plain state read; settling happens on the loop
                    continue
                result: np.ndarray | BaseException
                try:
                    result = self._decode_now(job.codes)
                except Exception as exc:
                    result = exc
                try:
                    self._loop.call_soon_threadsafe(_resolve, job.future, result)
                except RuntimeError:  # the loop is closed: nobody is waiting any more
                    return
