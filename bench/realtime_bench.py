"""Realtime sessions against the HTTP ways an agent speaks today: an LLM's reply streamed in at its pace.

    python -m bench.realtime_bench --url http://127.0.0.1:9091 [--model tts-1] [--voice husein]
        [--sessions 1,8,16] [--tokens-per-s 30] [--modes realtime,whole,sentences]
        [--max-tokens N] [--chars N] [--first-sentence] [--out NAME.json]

Each session is one agent reply (``REPLIES``, cycled), cut into LLM tokens (words, long words in pieces
of four characters, as BPE tokens run) and written at ``--tokens-per-s``; ``--sessions N`` runs N replies
at once. Three ways to speak it:

- ``realtime``: our protocol (``/v1/audio/speech/realtime``), each token sent as an ``input.text`` delta
  the moment the LLM writes it, ``input.done`` after the last;
- ``whole``: the reply sent to ``/v1/audio/speech`` (streamed pcm) once the LLM has finished it;
- ``sentences``: as LiveKit's ``StreamAdapter`` does with a TTS that cannot stream text in: each sentence
  sent to ``/v1/audio/speech`` as soon as it is complete and the one before has been synthesized, the
  audio played in order.

Per session: ``first_audio_s`` from the LLM's first token to the first audio byte; ``end_s`` from its
last token to the last audio byte; ``stalls`` and ``stall_s``: a listener who starts playing at the first
audio runs dry this many times, for this long in all (gaps of 20 ms or more). Prints JSON on stdout and a
table of medians on stderr; ``--out`` writes the JSON to ``bench/results/``. The server is whatever
``--url`` serves (``make serve`` or ``python -m app`` with the models to measure).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import websockets

from bench.saving import save_report

REPLIES = (
    "Sure, I can help with that. Your order shipped on Monday, and the courier expects to deliver it "
    "tomorrow before noon. Is there anything else you need?",
    "Thanks for calling back. I checked your account and the refund went out this morning; it usually "
    "takes three to five business days to appear. Would you like a confirmation by email?",
    "Good question. The new plan includes unlimited calls, twenty gigabytes of data, and roaming in "
    "most of Asia. It starts next month, and you can switch at any time.",
    "I am sorry about the delay. A technician can visit on Thursday afternoon or Friday morning. Which "
    "one works better for you?",
)
BYTES_PER_S = 48000  # pcm: 24 kHz, 16-bit
STALL_S = 0.02


def llm_tokens(text: str) -> list[str]:
    """The reply as an LLM writes it: words with their leading space, long words in four-letter pieces."""
    tokens: list[str] = []
    for word in re.findall(r"\s*\S+", text):
        while len(word) > 6:
            tokens.append(word[:4])
            word = word[4:]
        tokens.append(word)
    return tokens


def reply(text: str, chars: int, first_sentence: bool = False) -> str:
    """``text`` (its first sentence only, with ``first_sentence``), or its first whole words within
    ``chars`` characters (0: all of it)."""
    if first_sentence:
        text = sentences(text)[0]
    if not chars or len(text) <= chars:
        return text
    return text[: text.rfind(" ", 0, chars + 1)].rstrip(",;") + "."


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


@dataclass
class Session:
    """One reply's timeline: when its tokens were written and when its audio arrived."""

    first_token: float = 0.0
    last_token: float = 0.0
    arrivals: list[tuple[float, float]] = field(default_factory=list)  # (time, seconds of audio)
    error: str | None = None

    def audio(self, at: float, data: bytes | int) -> None:
        size = data if isinstance(data, int) else len(data)
        if size:
            self.arrivals.append((at, size / BYTES_PER_S))

    def report(self) -> dict[str, Any]:
        if not self.arrivals:
            return {"error": self.error or "no audio"}
        start = self.arrivals[0][0]
        played, stalls, stalled = 0.0, 0, 0.0
        for at, seconds in self.arrivals:
            due = start + played + stalled
            if at - due >= STALL_S:
                stalls += 1
                stalled += at - due
            played += seconds
        return {
            "first_audio_s": round(start - self.first_token, 4),
            "end_s": round(self.arrivals[-1][0] - self.last_token, 4),
            "audio_s": round(played, 3),
            "stalls": stalls,
            "stall_s": round(stalled, 4),
            "error": self.error,
        }


async def write(tokens: list[str], pace: float, session: Session, send: Any) -> None:
    """Hand ``tokens`` to ``send`` at ``pace`` tokens a second, as an LLM streams them."""
    start = time.monotonic()
    session.first_token = start
    for i, token in enumerate(tokens):
        await asyncio.sleep(max(0.0, start + i / pace - time.monotonic()))
        await send(token)
    session.last_token = time.monotonic()


async def realtime(args: argparse.Namespace, text: str, n: int) -> Session:
    session = Session()
    url = args.url.replace("http", "ws", 1) + "/v1/audio/speech/realtime"
    options = {"model": args.model, "voice": args.voice, "response_format": "pcm", "seed": n}
    if args.max_tokens:
        options["max_tokens"] = args.max_tokens
    async with websockets.connect(url, max_size=None, open_timeout=60) as ws:
        await ws.send(json.dumps({"type": "context.create", "context_id": "r", "options": options}))
        seq = 0

        async def send(token: str) -> None:
            nonlocal seq
            await ws.send(json.dumps({"type": "input.text", "context_id": "r", "seq": seq, "text": token}))
            seq += 1

        async def receive() -> None:
            async for message in ws:
                if isinstance(message, bytes):
                    session.audio(time.monotonic(), len(message) - 1 - message[0])
                    continue
                event = json.loads(message)
                if event["type"] == "error":
                    session.error = event["error"]["message"]
                    return
                if event["type"] == "context.done":
                    return

        receiving = asyncio.create_task(receive())
        await write(llm_tokens(text), args.tokens_per_s, session, send)
        await ws.send(json.dumps({"type": "input.done", "context_id": "r"}))
        await receiving
    return session


async def speech(
    client: httpx.AsyncClient, args: argparse.Namespace, text: str, seed: int, session: Session
) -> None:
    body = {"model": args.model, "voice": args.voice, "input": text, "response_format": "pcm", "seed": seed}
    if args.max_tokens:
        body["max_tokens"] = args.max_tokens
    async with client.stream("POST", "/v1/audio/speech", json=body) as response:
        if response.status_code != 200:
            session.error = (await response.aread()).decode()[:200]
            return
        async for chunk in response.aiter_raw():
            session.audio(time.monotonic(), chunk)


async def whole(args: argparse.Namespace, text: str, n: int) -> Session:
    session = Session()

    async def nothing(token: str) -> None:
        return None

    async with httpx.AsyncClient(base_url=args.url, timeout=600) as client:
        await write(llm_tokens(text), args.tokens_per_s, session, nothing)
        await speech(client, args, text, n, session)
    return session


async def by_sentence(args: argparse.Namespace, text: str, n: int) -> Session:
    session = Session()
    ready: asyncio.Queue[str | None] = asyncio.Queue()
    written = ""

    async def send(token: str) -> None:
        nonlocal written
        written += token
        done = sentences(written)
        if len(done) > 1:
            for sentence in done[:-1]:
                ready.put_nowait(sentence)
            written = done[-1]

    async def speak(client: httpx.AsyncClient) -> None:
        k = 0
        while (sentence := await ready.get()) is not None:
            await speech(client, args, sentence, n * 100 + k, session)
            k += 1

    async with httpx.AsyncClient(base_url=args.url, timeout=600) as client:
        speaking = asyncio.create_task(speak(client))
        await write(llm_tokens(text), args.tokens_per_s, session, send)
        for sentence in sentences(written):
            ready.put_nowait(sentence)
        ready.put_nowait(None)
        await speaking
    return session


MODES = {"realtime": realtime, "whole": whole, "sentences": by_sentence}


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


async def run(args: argparse.Namespace) -> dict[str, Any]:
    report: dict[str, Any] = {
        "url": args.url,
        "model": args.model,
        "voice": args.voice,
        "tokens_per_s": args.tokens_per_s,
        "max_tokens": args.max_tokens or None,
        "chars": args.chars or None,
        "first_sentence": args.first_sentence,
        "runs": [],
    }
    for count in args.sessions:
        for mode in args.modes:
            texts = [reply(REPLIES[i % len(REPLIES)], args.chars, args.first_sentence) for i in range(count)]
            sessions = await asyncio.gather(*(MODES[mode](args, text, i) for i, text in enumerate(texts)))
            results = [s.report() for s in sessions]
            good = [r for r in results if "first_audio_s" in r]
            report["runs"].append(
                {
                    "mode": mode,
                    "sessions": count,
                    "first_audio_s": median([r["first_audio_s"] for r in good]),
                    "end_s": median([r["end_s"] for r in good]),
                    "stalls": median([r["stalls"] for r in good]),
                    "stall_s": median([r["stall_s"] for r in good]),
                    "failed": len(results) - len(good),
                    "per_session": results,
                }
            )
    return report


def table(report: dict[str, Any]) -> str:
    lines = [f"{'mode':<10} {'sessions':>8} {'first audio s':>14} {'end s':>8} {'stalls':>7} {'stall s':>8}"]
    for run in report["runs"]:
        lines.append(
            f"{run['mode']:<10} {run['sessions']:>8} {run['first_audio_s']!s:>14} {run['end_s']!s:>8} "
            f"{run['stalls']!s:>7} {run['stall_s']!s:>8}"
            + (f"  ({run['failed']} failed)" if run["failed"] else "")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default="http://127.0.0.1:9091")
    parser.add_argument("--model", default="tts-1")
    parser.add_argument("--voice", default=None)
    parser.add_argument("--sessions", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 16])
    parser.add_argument("--modes", type=lambda s: s.split(","), default=list(MODES))
    parser.add_argument("--tokens-per-s", type=float, default=30.0)
    parser.add_argument(
        "--max-tokens", type=int, default=0, help="max_tokens of every generation (0: the server's)"
    )
    parser.add_argument(
        "--chars", type=int, default=0, help="cut each reply to its first words within this many"
    )
    parser.add_argument("--first-sentence", action="store_true", help="each reply's first sentence only")
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    report = asyncio.run(run(args))
    print(json.dumps(report, indent=2))
    print(table(report), file=sys.stderr)
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
