"""4 processes x 50 appends, to one shared id and to one id each, through the shm and redis stores:
no turn is lost, each writer's turns stay in order, and no file is left corrupt or half-written."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from app.interleave.stores.base import TurnStore
from app.interleave.stores.redis import RedisStore
from app.interleave.stores.shm import ShmStore
from tests.interleave.append_worker import NO_CODE_CAP, TTL_S, writer_turn
from tests.interleave.conftest import REDIS_URL

PROCESSES = 4
APPENDS = 50
ROOT = Path(__file__).resolve().parents[2]


def run_writers(location: list[str], sync_dir: Path) -> None:
    """Start the writers, release them together once all are ready, and wait for them to succeed."""
    go = sync_dir / "go"
    ready = [sync_dir / f"ready-{n}" for n in range(PROCESSES)]
    module = [sys.executable, "-m", "tests.interleave.append_worker", *location]
    writers = [
        subprocess.Popen([*module, str(n), str(APPENDS), str(ready[n]), str(go)], cwd=ROOT)
        for n in range(PROCESSES)
    ]
    try:
        deadline = time.monotonic() + 30
        while not all(path.exists() for path in ready):
            assert time.monotonic() < deadline, "writers did not start"
            assert all(w.poll() is None for w in writers), "a writer died before starting"
            time.sleep(0.01)
        go.touch()
        for writer in writers:
            assert writer.wait(timeout=60) == 0
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
                writer.wait()


async def check_no_turn_lost(store: TurnStore) -> None:
    shared = (await store.load("shared")).turns
    assert len(shared) == PROCESSES * APPENDS
    assert set(shared) == {writer_turn(p, i) for p in range(PROCESSES) for i in range(APPENDS)}
    for process in range(PROCESSES):
        mine = [t.codes[1] for t in shared if t.codes[0] == process]
        assert mine == list(range(APPENDS)), "one writer's turns kept their order"
        own = (await store.load(f"own-{process}")).turns
        assert own == [writer_turn(process, i) for i in range(APPENDS)]


def test_shm_store_under_four_processes(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    run_writers(["shm", str(store_dir)], tmp_path)
    asyncio.run(check_no_turn_lost(ShmStore(store_dir, TTL_S, NO_CODE_CAP)))
    names = sorted(path.name for path in store_dir.iterdir())
    assert not [name for name in names if name.endswith(".tmp")], "no temp file left behind"
    data = [name for name in names if name.endswith(".json")]
    assert len(data) == 1 + PROCESSES
    for name in data:
        json.loads((store_dir / name).read_bytes())  # every file is whole


def test_redis_store_under_four_processes(tmp_path: Path, redis_prefix: str) -> None:
    run_writers(["redis", REDIS_URL, redis_prefix], tmp_path)

    async def check() -> None:
        store = RedisStore(REDIS_URL, TTL_S, NO_CODE_CAP, prefix=redis_prefix)
        await store.start()
        try:
            await check_no_turn_lost(store)
        finally:
            await store.close()

    asyncio.run(check())


def test_shm_trim_under_concurrent_appends_keeps_the_cap(tmp_path: Path) -> None:
    """With a turn cap, concurrent appends (worker threads of one process) leave exactly ``keep`` turns."""
    keep = 3
    store_dir = tmp_path / "store"
    store = ShmStore(store_dir, TTL_S, NO_CODE_CAP)

    async def appends(process: int) -> None:
        for index in range(APPENDS):
            await store.append("capped", writer_turn(process, index), keep=keep)

    async def run() -> None:
        await asyncio.gather(*(appends(p) for p in range(PROCESSES)))
        assert len((await store.load("capped")).turns) == keep

    asyncio.run(run())
