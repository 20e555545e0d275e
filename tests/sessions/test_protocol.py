"""Our realtime protocol (``/v1/audio/speech/realtime``) with a plain WebSocket client (``websockets``):
typed events, sequence numbers and acknowledgements, binary and base64 audio, word timestamps, usage;
MOSS turns equal however their text arrives (deltas of 1, 3 and 17 characters, starved mid-way, eight
at once); errors for one context leave the connection and the others working; cancel and a vanished
client free every generation, codec stream and slot (the engine and /metrics)."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import websockets

from app.api.asyncapi import DOCUMENT
from app.families.moss.lm.types import AUDIO_EOS
from tests.sessions.conftest import MOSS, Served

PATH = "/v1/audio/speech/realtime"
TEXT = "Hello there, my friend. The weather is fine today, and 3.5 of us will walk to the park!"
GREEDY = {"temperature": 0}
SEEDED = {"temperature": 1.0, "top_k": 50, "seed": 11}


@dataclass
class Turn:
    """What one context received."""

    audio: bytes = b""
    events: list[dict[str, Any]] = field(default_factory=list)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["type"] == kind]


class Client:
    """A connection, its messages sorted by context."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.turns: dict[str | None, Turn] = {}
        self.created: dict[str, Any] = {}

    async def send(self, **message: Any) -> None:
        await self.ws.send(json.dumps(message))

    def turn(self, context_id: str | None) -> Turn:
        return self.turns.setdefault(context_id, Turn())

    async def read(self) -> dict[str, Any] | None:
        """One message, sorted into its context's turn: the event, or None for binary audio."""
        raw = await asyncio.wait_for(self.ws.recv(), 60)
        if isinstance(raw, bytes):
            n = raw[0]
            self.turn(raw[1 : 1 + n].decode()).audio += raw[1 + n :]
            return None
        event: dict[str, Any] = json.loads(raw)
        if event["type"] == "session.created":
            self.created = event
            return event
        turn = self.turn(event.get("context_id"))
        turn.events.append(event)
        if event["type"] == "audio.delta":
            turn.audio += base64.b64decode(event["audio"])
        return event

    async def until(self, context_id: str | None, *kinds: str) -> Turn:
        """Read messages until ``context_id`` gets one of ``kinds``."""
        while True:
            event = await self.read()
            if event is not None and event.get("context_id") == context_id and event["type"] in kinds:
                return self.turn(context_id)


async def connect(served: Served) -> Any:
    return websockets.connect(served.ws + PATH, max_size=None)


async def speak(
    client: Client, context_id: str, text: str, step: int, options: dict[str, Any], starve: Any = None
) -> Turn:
    """One context: ``text`` in deltas of ``step`` characters (``starve``: awaited half-way)."""
    await client.send(type="context.create", context_id=context_id, options=options)
    chunks = [text[i : i + step] for i in range(0, len(text), step)]
    for seq, chunk in enumerate(chunks):
        if starve is not None and seq == len(chunks) // 2:
            await starve()
        await client.send(type="input.text", context_id=context_id, seq=seq, text=chunk)
    await client.send(type="input.done", context_id=context_id)
    return await client.until(context_id, "context.done", "error")


def moss_options(sampling: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return (
        {"model": MOSS, "voice": "default", "response_format": "pcm_f32le", "timestamps": True}
        | sampling
        | extra
    )


@pytest.mark.parametrize("sampling", [GREEDY, SEEDED], ids=["greedy", "seeded"])
async def test_moss_turn_is_the_same_however_its_text_arrives(
    served: Served, sampling: dict[str, Any]
) -> None:
    engine = served.moss.lm.engine  # type: ignore[union-attr]
    options = moss_options(sampling)

    async def alone(context_id: str, step: int, starve: Any = None) -> Turn:
        """One turn on a connection of its own: a connection's earlier turns that ended normally are the
        next one's history, which would change its prompt."""
        async with await connect(served) as ws:
            return await speak(Client(ws), context_id, TEXT, step, options, starve=starve)

    whole = await alone("whole", len(TEXT))
    assert whole.of("context.done") and len(whole.audio) > 0
    for step in (1, 3, 17):
        turn = await alone(f"step{step}", step)
        assert turn.audio == whole.audio, step
        assert [e["seq"] for e in turn.of("input.ack")] == list(range(-(-len(TEXT) // step)))

    async def parked() -> None:  # wait until the generation has run dry and parked
        for _ in range(2000):
            if engine.parked:
                return
            await asyncio.sleep(0.005)
        raise AssertionError("the starved turn never parked")

    parks = engine.parks
    starved = await alone("starved", 4, starve=parked)
    assert engine.parks > parks
    assert starved.audio == whole.audio
    usage = starved.of("context.done")[0]["usage"]
    assert usage["parked_seconds"] > 0 and usage["output_tokens"] * 1920 * 4 == len(whole.audio)
    words = [w for event in whole.of("word.timestamps") for w in event["words"]]
    assert [w["word"] for w in words] == TEXT.split()
    assert all(a["end"] <= b["start"] + 1e-6 for a, b in itertools.pairwise(words))
    assert words[-1]["end"] == pytest.approx(len(whole.audio) / 4 / 24000, abs=1e-3)


async def test_eight_moss_sessions_at_once_equal_each_alone(served: Served) -> None:
    texts = [f"Session {n} speaks its own sentence, one word after another." for n in range(8)]
    options = [moss_options(SEEDED if n % 2 else GREEDY, seed=n) for n in range(8)]
    alone = []
    for n in range(8):  # each on a connection of its own: no turn is another's history
        async with await connect(served) as ws:
            alone.append((await speak(Client(ws), f"alone{n}", texts[n], len(texts[n]), options[n])).audio)

    async def one(n: int) -> bytes:
        async with await connect(served) as ws:
            return (await speak(Client(ws), f"c{n}", texts[n], 1 + n, options[n])).audio

    engine = served.moss.lm.engine  # type: ignore[union-attr]
    together = await asyncio.gather(*(one(n) for n in range(8)))
    assert engine.peak_rows >= 4
    for want, have in zip(alone, together, strict=True):
        # the same frames; the codec decodes the eight streams batched, equal to float rounding
        assert len(want) == len(have) and np.allclose(f32(want), f32(have), atol=1e-4)


def f32(audio: bytes) -> np.ndarray:
    return np.frombuffer(audio, "<f4")


async def test_binary_and_base64_audio_rates_and_timestamps(served: Served) -> None:
    async with await connect(served) as ws:
        client = Client(ws)
        await client.send(type="session.update", session={"voice": "husein", "timestamps": True})
        binary = await speak(client, "a", "Hi there. How are you?", 5, {"response_format": "pcm"})
        b64 = await speak(
            client,
            "b",
            "Hi there. How are you?",
            5,
            {"response_format": "pcm_mulaw", "sample_rate": 8000, "audio": "base64"},
        )
        mp3 = await speak(client, "c", "Hi there.", 50, {"response_format": "mp3"})
    assert client.created["session"]["response_format"] == "pcm"
    assert binary.audio and not binary.of("audio.delta")
    assert b64.of("audio.delta") and len(b64.audio) == pytest.approx(len(binary.audio) / 2 / 3, abs=8)
    assert mp3.audio[:3] == b"ID3" or mp3.audio[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2")
    words = [w["word"] for e in binary.of("word.timestamps") for w in e["words"]]
    assert words == ["Hi", "there.", "How", "are", "you?"]
    assert binary.of("context.done")[0]["usage"]["audio_seconds"] == pytest.approx(
        len(binary.audio) / 2 / 24000, abs=0.01
    )


async def test_bad_messages_fail_their_context_and_nothing_else(served: Served) -> None:
    limit = served.app.state.session_limits.message_bytes
    async with await connect(served) as ws:
        client = Client(ws)
        await client.send(type="context.create", context_id="good", options={"voice": "husein"})
        await client.send(type="input.text", context_id="good", seq=0, text="Still fine, ")
        await ws.send("{not json")
        assert (await client.until(None, "error")).of("error")[-1]["error"]["param"] == "message"
        await ws.send(json.dumps({"type": "input.text", "context_id": "big", "text": "x" * (limit + 1)}))
        assert (await client.until(None, "error")).of("error")[-1]["error"]["code"] == "message_too_large"
        await client.send(type="nonsense", context_id="other")
        assert (await client.until("other", "error")).of("error")[-1]["error"]["code"] == "unknown_type"
        await client.send(type="context.create", context_id="bad", options={"voice": "nobody"})
        assert (await client.until("bad", "error")).of("error")[-1]["error"]["param"] == "voice"
        await client.send(
            type="context.create", context_id="rate", options={"response_format": "mp3", "sample_rate": 8000}
        )
        assert (await client.until("rate", "error")).of("error")[-1]["error"]["param"] == "sample_rate"
        await client.send(type="input.text", context_id="good", seq=5, text="out of order")
        assert (await client.until("good", "error")).of("error")[-1]["error"]["code"] == "invalid_sequence"
        # the good context failed on its own bad message; a new one on the same connection works
        turn = await speak(client, "after", "And this is spoken.", 4, {"voice": "husein"})
    assert turn.of("context.done") and turn.audio


async def test_cancel_and_a_vanished_client_free_everything(served: Served) -> None:
    engine = served.moss.lm.engine  # type: ignore[union-attr]
    codec = served.moss.codec

    async def released() -> None:
        for _ in range(500):
            if (
                engine.active == 0
                and codec.live_streams == 0
                and await served.metric("tts_realtime_active_contexts") == 0
                and await served.metric("tts_active_streams") == 0
            ):
                return
            await asyncio.sleep(0.01)
        raise AssertionError((engine.active, codec.live_streams))

    long = "A long turn that keeps going, " * 6
    async with await connect(served) as ws:
        client = Client(ws)
        await client.send(
            type="context.create", context_id="x", options=moss_options(GREEDY, max_tokens=2000)
        )
        await client.send(type="input.text", context_id="x", seq=0, text=long)
        while not client.turn("x").audio:
            await client.read()
        assert engine.active == 1
        steps = engine.steps
        await client.send(type="context.cancel", context_id="x")
        await released()
        assert engine.steps - steps <= 3  # it left within a step or two of the cancel arriving
        assert await served.metric('tts_realtime_contexts_total{outcome="cancelled"}') >= 1
        # the next turn starts at once on the same connection
        after = await speak(client, "y", "Next.", 10, moss_options(GREEDY))
        assert after.of("context.done")
    # a client that vanishes mid-turn
    ws = await websockets.connect(served.ws + PATH)
    await ws.send(
        json.dumps(
            {"type": "context.create", "context_id": "z", "options": moss_options(GREEDY, max_tokens=2000)}
        )
    )
    await ws.send(json.dumps({"type": "input.text", "context_id": "z", "text": long}))
    while engine.active == 0:
        await asyncio.sleep(0.01)
    ws.transport.abort()  # no close frame: the TCP connection just ends
    await released()
    assert await served.metric("tts_realtime_sessions") == 0


async def test_the_asyncapi_document_is_served_and_names_every_message(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url) as http:
        document = (await http.get(PATH + "/asyncapi.json")).json()
    assert document == json.loads(json.dumps(DOCUMENT))
    pinned = json.loads((Path(__file__).parent / "asyncapi_snapshot.json").read_text())
    assert document == pinned, "the realtime protocol changed: update tests/sessions/asyncapi_snapshot.json"
    messages = document["channels"]["realtime"]["messages"]
    assert {"client.input.text", "client.input.done", "client.context.cancel", "server.audio.delta"} <= set(
        messages
    )
    assert document["channels"]["realtime"]["address"] == PATH


async def test_the_turns_of_a_connection_are_one_conversation(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    interleave = served.app.state.engine.interleave
    engine = served.moss.lm.engine  # type: ignore[union-attr]
    frame = engine._frame

    def stops_after_eight(hidden: Any, state: Any) -> tuple[Any, Any]:
        codes, failed = frame(hidden, state)
        codes = codes.clone()  # a model that ends its turn (random weights rarely sample EOS)
        codes[state.frames >= 8, 0] = AUDIO_EOS
        return codes, failed

    monkeypatch.setattr(engine, "_frame", stops_after_eight)
    async with await connect(served) as ws:
        client = Client(ws)
        first = await speak(client, "m1", "The first turn.", 5, moss_options(GREEDY))
        second = await speak(client, "m2", "The second turn.", 5, moss_options(GREEDY))
        n1 = await speak(client, "n1", "Hello there.", 5, {"voice": "husein"})
        n2 = await speak(client, "n2", "Again here.", 5, {"voice": "husein"})
    usage = [turn.of("context.done")[0]["usage"] for turn in (first, second)]
    assert usage[0]["output_tokens"] == 8
    assert usage[1]["prompt_tokens"] > usage[0]["prompt_tokens"] + 8  # the first turn is its history
    prompts = [request.body["prompt"] for request in served.vllm.requests]
    assert "Hello there." in prompts[-1] and "Again here." in prompts[-1]  # the turn before, as context
    assert n1.of("context.done") and n2.of("context.done")
    for _ in range(100):  # the connection's conversation is dropped when it closes
        if not interleave.store._entries:  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.02)
    assert not interleave.store._entries  # type: ignore[attr-defined]


@pytest.mark.parametrize("options", [{"voice": "husein"}, moss_options(GREEDY)], ids=["neucodec", "moss"])
async def test_a_turns_stall_is_observed_without_the_wait_for_its_text(
    served: Served, options: dict[str, Any]
) -> None:
    """The agent's LLM pauses for 3 s after its first sentence: the listener runs dry, but for the text,
    which the server could not speak before it came (a NeuCodec turn's next segment is not due before
    its text; a MOSS row parked for its text is not stalled by the server)."""
    first = "The first sentence is spoken here. "

    async def pause() -> None:
        await asyncio.sleep(3.0)

    before = await served.metric("tts_stream_stall_seconds_count")
    async with await connect(served) as ws:
        turn = await speak(Client(ws), "p", first + "Then more.", len(first), options, pause)
    assert turn.of("context.done"), turn.events
    assert await served.metric("tts_stream_stall_seconds_count") == before + 1
    assert await served.metric("tts_stream_stall_seconds_sum") < 1.0  # the pause counted: about 2-2.5 s
