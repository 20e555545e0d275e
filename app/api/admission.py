"""Admission control for the synthesis and upload routes: at most MAX_CONCURRENT_STREAMS at once.

Beyond that a request waits in a bounded FIFO queue (MAX_QUEUED_STREAMS) for up to QUEUE_WAIT_S; a
full queue or a wait that runs out is answered 429 with ``Retry-After`` and the OpenAI error body.
The slot is held until the response's last byte is sent, and released on success, error, cancellation
or client disconnect alike (the middleware's ``finally``).
"""

from __future__ import annotations

import asyncio
import math
from collections import deque

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.errors import RateLimited
from app.core.routes import ADMITTED_PATHS
from app.observability.metrics import Metrics


class Admission:
    """Stream slots and their wait queue (one event loop; no locks needed)."""

    def __init__(self, max_active: int, max_queued: int, wait_s: float, metrics: Metrics) -> None:
        self.max_active = max_active  # 0: no limit
        self.max_queued = max_queued
        self.wait_s = wait_s
        self.active = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._metrics = metrics
        self._retry_after = str(max(1, math.ceil(wait_s)))

    def _rejected(self, why: str) -> RateLimited:
        return RateLimited(
            f"The server is at its limit of {self.max_active} concurrent streams ({why}); retry later.",
            headers={"Retry-After": self._retry_after},
        )

    def _gauges(self) -> None:
        self._metrics.active.set(self.active)
        self._metrics.queued.set(len(self._waiters))

    async def acquire(self) -> None:
        """Take a slot, waiting in the queue if needed; RateLimited when none comes."""
        if self.max_active == 0 or (self.active < self.max_active and not self._waiters):
            self.active += 1
            self._gauges()
            return
        if len(self._waiters) >= self.max_queued:
            raise self._rejected("the wait queue is full")
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._gauges()
        try:
            async with asyncio.timeout(self.wait_s):
                await waiter  # release() hands its slot over by setting the result
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():
                self.release()  # the slot arrived as the wait ended: pass it on
            elif not waiter.done():
                waiter.cancel()
            if isinstance(exc, TimeoutError):
                raise self._rejected(f"no slot within {self.wait_s:g} s") from None
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            self._gauges()

    def release(self) -> None:
        """Give a slot back: to the first live waiter, else to the pool."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._gauges()
                return
        self.active -= 1
        self._gauges()


class AdmissionMiddleware:
    """Holds a slot around each synthesis or voice-registration request, 429 when none is available."""

    def __init__(self, app: ASGIApp, admission: Admission) -> None:
        self.app = app
        self.admission = admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in ADMITTED_PATHS:
            await self.app(scope, receive, send)
            return
        try:
            await self.admission.acquire()
        except RateLimited as error:
            response = JSONResponse(error.body(), status_code=error.status, headers=error.headers)
            await response(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.admission.release()
