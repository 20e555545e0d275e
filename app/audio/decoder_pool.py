"""The upload decoder: reference audio is decoded on its own few threads, never on the shared pool.

The event loop's default executor also runs the response encoders, loudness and file work of every
stream; a slow or hostile upload decoded there would delay them all. ``ReferenceDecoder`` owns a
``ThreadPoolExecutor`` of ``threads`` workers and lets at most that many decodes be submitted at
once (a semaphore in front, so the executor's own queue never grows); a request waits for a worker
for at most ``timeout_s`` (503 after that), and each decode holds its worker for at most
``timeout_s`` (``load_references``' deadline, a 400), in at most the memory ``app.audio.io`` states.
Threads start on first use; ``close`` stops them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from app.audio.io import REFERENCE_RATE, ReferenceAudio, load_references
from app.core.errors import Unavailable


class ReferenceDecoder:
    """Decodes uploaded references to mono (16 kHz unless asked otherwise) on ``threads`` dedicated
    worker threads."""

    def __init__(self, *, threads: int, timeout_s: float, min_s: float, max_s: float) -> None:
        self.threads = threads
        self.timeout_s = timeout_s
        self.min_s = min_s
        self.max_s = max_s
        self._slots = asyncio.Semaphore(threads)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="upload-decode")

    async def decode(self, data: bytes, param: str, rate: int = REFERENCE_RATE) -> ReferenceAudio:
        """``data`` decoded to mono at ``rate``. Raises InvalidRequest (400) or Unavailable (503)."""
        return (await self.decode_rates(data, param, (rate,)))[rate]

    async def decode_rates(self, data: bytes, param: str, rates: Sequence[int]) -> dict[int, ReferenceAudio]:
        """``data`` decoded once by ``load_references`` to mono at each of ``rates``. Raises InvalidRequest
        (400) or Unavailable (503)."""
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._slots.acquire()
        except TimeoutError:
            raise Unavailable(
                f"{param}: every upload decoder stayed busy for {self.timeout_s:g} s; retry later.",
                code="decoder_busy",
                headers={"Retry-After": str(max(1, round(self.timeout_s)))},
            ) from None
        job = functools.partial(
            load_references,
            data,
            min_s=self.min_s,
            max_s=self.max_s,
            param=param,
            rates=tuple(dict.fromkeys(rates)),
            timeout_s=self.timeout_s,
        )
        loop = asyncio.get_running_loop()
        try:
            future = self._pool.submit(job)
        except BaseException:
            self._slots.release()
            raise
        # the slot is the thread: it comes back when the decode ends, even if its caller has left
        future.add_done_callback(lambda _: _call_soon(loop, self._slots.release))
        return await asyncio.wrap_future(future)

    def close(self) -> None:
        """Stop the worker threads once the decodes in flight have ended (each within ``timeout_s``)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], object]) -> None:
    """``callback`` on ``loop`` from a worker thread (nothing when the loop has closed)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)
