"""One realtime connection: its contexts, its conversation, its limits; and the server's count of them.

``Sessions`` (one per app) bounds the connections open at once, in all (``REALTIME_MAX_SESSIONS``) and
per API key (``REALTIME_MAX_SESSIONS_PER_KEY``). A ``Session`` holds at most ``REALTIME_MAX_CONTEXTS``
open contexts; a context id that is not open starts a new context (with the options of its first
message), one that is open takes text. The session's conversation is an interleave id of its own (in
its key's namespace, or the one the client named): each finished turn is stored there, so the next
context continues it (same voice: the families' history rules) - the turns of one connection are one
conversation, as the model was trained. A session that was not given an id deletes its conversation
when it closes. ``close`` cancels every context: their generations, codec streams and slots are freed
within one step.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field

import anyio

from app.core.errors import InvalidRequest, RateLimited
from app.core.settings import ServerSettings
from app.interleave.ids import scoped
from app.observability.metrics import Metrics
from app.sessions.context import Admission, Context, Emit, Limits
from app.sessions.plan import ContextRequest, plan_context
from app.synthesis.engine import Engine

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionLimits:
    """A connection's limits (the REALTIME_* settings)."""

    contexts: int = 8
    message_bytes: int = 65536
    idle_s: float = 300.0
    send_s: float = 10.0
    context: Limits = field(default_factory=Limits)

    @classmethod
    def from_settings(cls, settings: ServerSettings) -> SessionLimits:
        s = settings
        return cls(
            contexts=s.REALTIME_MAX_CONTEXTS,
            message_bytes=s.REALTIME_MAX_MESSAGE_BYTES,
            idle_s=s.REALTIME_IDLE_TIMEOUT_S,
            send_s=s.REALTIME_SEND_TIMEOUT_S,
            context=Limits(
                chars=s.REALTIME_MAX_CONTEXT_CHARS,
                input_idle_s=s.REALTIME_INPUT_TIMEOUT_S,
                turn_s=s.REALTIME_TURN_TIMEOUT_S,
            ),
        )


class Sessions:
    """The connections open in this process, in all and per tenant (one event loop: no locks)."""

    def __init__(self, most: int, per_key: int, metrics: Metrics) -> None:
        self.most = most
        self.per_key = per_key
        self.metrics = metrics
        self.open = 0
        self._by_tenant: Counter[str | None] = Counter()

    def take(self, tenant: str | None) -> None:
        """Count a new connection; RateLimited when realtime is off or a limit is reached."""
        if self.most == 0:
            raise RateLimited("Realtime sessions are off on this server (REALTIME_MAX_SESSIONS=0).")
        if self.open >= self.most:
            raise RateLimited(f"The server has its limit of {self.most} realtime sessions open; retry later.")
        if tenant is not None and self._by_tenant[tenant] >= self.per_key:
            raise RateLimited(f"This API key has its limit of {self.per_key} realtime sessions open.")
        self.open += 1
        self._by_tenant[tenant] += 1
        self.metrics.realtime_sessions.set(self.open)

    def give_back(self, tenant: str | None) -> None:
        self.open -= 1
        self._by_tenant[tenant] -= 1
        if self._by_tenant[tenant] <= 0:
            del self._by_tenant[tenant]
        self.metrics.realtime_sessions.set(self.open)


class Session:
    """One connection's contexts (see the module docstring)."""

    def __init__(
        self,
        engine: Engine,
        emit: Emit,
        limits: SessionLimits,
        admission: Admission | None = None,
        tenant: str | None = None,
        conversation: str | None = None,
    ) -> None:
        self.engine = engine
        self.emit = emit
        self.limits = limits
        self.admission = admission
        self.id = uuid.uuid4().hex
        self.named = conversation is not None
        self.conversation = scoped(conversation or f"realtime/{self.id}", tenant)
        self.contexts: dict[str, Context] = {}
        self.closed = False

    def open_context(self, context_id: str) -> Context | None:
        """The context ``context_id`` if it is open."""
        return self.contexts.get(context_id)

    async def start_context(self, context_id: str, request: ContextRequest) -> Context:
        """A new context (its plan resolved now: APIError for what it asks that cannot be served)."""
        if self.closed:
            raise InvalidRequest("the session is closing", param="context_id")
        if context_id in self.contexts:
            raise InvalidRequest(f"context {context_id!r} is already open", param="context_id")
        if len(self.contexts) >= self.limits.contexts:
            raise InvalidRequest(
                f"a connection may have at most {self.limits.contexts} contexts open",
                param="context_id",
                code="too_many_contexts",
            )
        plan = await plan_context(self.engine, request, self.conversation)
        context = Context(
            context_id, plan, self.engine, self.emit, self.limits.context, self.admission, self._finished
        )
        self.contexts[context_id] = context
        self.engine.metrics.realtime_active.inc()
        context.start()
        return context

    def _finished(self, context: Context) -> None:
        if self.contexts.get(context.id) is context:
            del self.contexts[context.id]
            self.engine.metrics.realtime_active.dec()

    async def cancel(self, context_id: str) -> bool:
        """Cancel an open context (barge-in); False when none is open by that id."""
        context = self.contexts.get(context_id)
        if context is None:
            return False
        await context.cancel()
        return True

    async def close(self) -> None:
        """Cancel every context (the client left or the connection ends) and drop the conversation."""
        self.closed = True
        with anyio.CancelScope(shield=True):
            await asyncio.gather(*(context.cancel() for context in list(self.contexts.values())))
            interleave = self.engine.interleave
            if not self.named and interleave.enabled:
                with contextlib.suppress(Exception):
                    await interleave.forget(self.conversation)
