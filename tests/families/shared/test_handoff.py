"""``post_all``: a step's items reach every row's reader in one call per event loop, before the end."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from app.families.shared.handoff import Ended, Handoff, post_all


async def test_a_step_is_one_call_per_loop_and_arrives_before_the_end() -> None:
    loop = asyncio.get_running_loop()
    handoffs: list[Handoff[int]] = [Handoff(loop) for _ in range(5)]
    calls = 0
    real = loop.call_soon_threadsafe

    def counted(callback: Any, *args: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(callback, *args)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]  # counted
    try:

        def engine_thread() -> None:
            post_all(handoffs, [10, 11, 12, 13, 14])
            post_all(handoffs[:2], [20, 21])
            handoffs[0].finish(Ended("stop"))

        thread = threading.Thread(target=engine_thread)
        thread.start()
        thread.join()
    finally:
        del loop.call_soon_threadsafe
    assert calls == 2 + 2  # one per step, then finish's two
    first = await handoffs[0].next_items()
    assert first == [10, 20] and handoffs[0].ended == Ended("stop")
    assert [await h.next_items() for h in handoffs[1:]] == [[11, 21], [12], [13], [14]]


async def test_a_closed_loop_cancels_its_rows() -> None:
    gone = asyncio.new_event_loop()
    gone.close()
    here = Handoff[int](asyncio.get_running_loop())
    there = Handoff[int](gone)
    post_all([here, there], [1, 2])
    assert there.cancel.is_set() and not here.cancel.is_set()
    assert await here.next_items() == [1]
