"""One writer of the concurrency tests, run as ``python -m tests.interleave.append_worker``.

Arguments: ``shm DIR`` or ``redis URL PREFIX``, then the process number, the number of turns, and the
ready and go file paths. It touches the ready file, waits for the go file (so all writers start
together), then appends its turns alternately to the shared id ``shared`` and to its own ``own-N``.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from app.interleave.stores.base import TurnStore
from app.interleave.stores.redis import RedisStore
from app.interleave.stores.shm import ShmStore
from app.interleave.turns import Turn

TTL_S = 600.0
NO_CODE_CAP = 10**9


def writer_turn(process: int, index: int) -> Turn:
    """The turn process ``process`` writes ``index``-th: unique text, codes that say who and when."""
    return Turn("husein", f"{process}:{index}", (process, index))


async def run(store: TurnStore, process: int, count: int, ready: Path, go: Path) -> None:
    await store.start()
    try:
        ready.touch()
        while not go.exists():
            time.sleep(0.001)
        for index in range(count):
            await store.append("shared", writer_turn(process, index), keep=0)
            await store.append(f"own-{process}", writer_turn(process, index), keep=0)
    finally:
        await store.close()


def main(argv: list[str]) -> None:
    if argv[0] == "shm":
        store: TurnStore = ShmStore(Path(argv[1]), TTL_S, NO_CODE_CAP)
        rest = argv[2:]
    else:
        store = RedisStore(argv[1], TTL_S, NO_CODE_CAP, prefix=argv[2])
        rest = argv[3:]
    process, count, ready, go = int(rest[0]), int(rest[1]), Path(rest[2]), Path(rest[3])
    asyncio.run(run(store, process, count, ready, go))


if __name__ == "__main__":
    main(sys.argv[1:])
