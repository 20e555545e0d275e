"""MOSS chunking against an LM's pace on a simulated clock: the listener's stalls with and without deadline
cuts, for an LM at 1 to 3 times real time.

    python -m bench.moss_pace_sim [--speeds 1,1.2,1.5,2,3] [--frames 60] [--fixed-ms 20 --per-frame-ms 2]
        [--out NAME.json]

Everything but the LM and the codec is the server's own ``app.families.moss.speak`` with the default
chunk sizes (1, 2, 4, 8, 8, ... frames), run on an event loop whose clock jumps to the next timer
(``looptime``) against:

- an LM that sends one frame (80 ms of audio) at a time on a fixed timeline at ``speed`` times real time
  (12.5 frames a second at 1): a batched engine serving several streams runs each of them near real time;
- a modeled codec: a decode of n frames takes ``fixed + per_frame * n``, times a seeded jitter of 0.7 to
  1.5.

Per speed and setting (``MOSS_DEADLINE_CUTS`` true or false): the first audio (s from the start), the total
stall of a listener who starts at the first audio and plays in real time, and the decodes. Prints JSON
and a table; ``--out`` writes the JSON under ``bench/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import looptime
import numpy as np

from app.audio.playback import Playback
from app.core.constants import SAMPLE_RATE
from app.core.stats import UtteranceStats
from app.families.moss.speak import ChunkSchedule, speak
from bench.saving import save_report

FRAME_S = 0.08
SAMPLES_PER_FRAME = 1920


async def paced_frames(count: int, speed: float) -> AsyncIterator[np.ndarray]:
    """``count`` frames, frame k at ``(k + 1) * 80 ms / speed`` from the start."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    for index in range(count):
        await asyncio.sleep(max(0.0, started + (index + 1) * FRAME_S / speed - loop.time()))
        yield np.zeros((1, 16), dtype=np.int64)


async def scenario(
    speed: float, cuts: bool, frames: int, fixed_s: float, per_frame_s: float
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    jitter = np.random.default_rng(0)

    async def decode(chunk: np.ndarray) -> np.ndarray:
        await asyncio.sleep((fixed_s + per_frame_s * len(chunk)) * jitter.uniform(0.7, 1.5))
        return np.zeros(SAMPLES_PER_FRAME * len(chunk), dtype=np.float32)

    stats, listener = UtteranceStats(), Playback(SAMPLE_RATE)
    started, first = loop.time(), None
    chunks = speak(
        paced_frames(frames, speed), decode, ChunkSchedule(1, 8, cuts), frames, stats, [], clock=loop.time
    )
    async for chunk in chunks:
        first = loop.time() - started if first is None else first
        listener.emit(chunk.size, loop.time())
    return {
        "first_audio_s": round(first or 0.0, 4),
        "stall_s": round(listener.stall_s, 4),
        "decodes": stats.decodes,
    }


def simulate(speed: float, cuts: bool, frames: int, fixed_s: float, per_frame_s: float) -> dict[str, Any]:
    loop = looptime.new_event_loop(start=0.0)
    try:
        return loop.run_until_complete(scenario(speed, cuts, frames, fixed_s, per_frame_s))
    finally:
        loop.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--speeds", default="1,1.2,1.5,2,3", help="LM speeds, times real time (CSV)")
    parser.add_argument("--frames", type=int, default=60, help="frames per utterance (80 ms each)")
    parser.add_argument("--fixed-ms", type=float, default=20.0, help="a decode's fixed cost")
    parser.add_argument("--per-frame-ms", type=float, default=2.0, help="its cost per frame")
    parser.add_argument("--out", help="file name for the JSON under bench/results/")
    args = parser.parse_args(argv)
    fixed_s, per_frame_s = args.fixed_ms / 1000, args.per_frame_ms / 1000
    results = {
        f"{float(speed):g}x": {
            name: simulate(float(speed), cuts, args.frames, fixed_s, per_frame_s)
            for name, cuts in (("doubling", False), ("cuts", True))
        }
        for speed in args.speeds.split(",")
    }
    report = {
        "bench": "moss_pace_sim",
        "codec": {"fixed_s": fixed_s, "per_frame_s": per_frame_s, "jitter": [0.7, 1.5]},
        "frames": args.frames,
        "results": results,
    }
    print(json.dumps(report))
    head = f"{'LM speed':<10}" + "".join(
        f"{n + ' ' + w:>18}" for n in ("doubling", "cuts") for w in ("stall", "decodes")
    )
    lines = [head, "-" * len(head)]
    for key, row in results.items():
        cells = "".join(f"{row[n]['stall_s']:>17.3f}s{row[n]['decodes']:>18}" for n in ("doubling", "cuts"))
        lines.append(f"{key:<10}{cells}")
    print("\n".join(lines), file=sys.stderr)
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
