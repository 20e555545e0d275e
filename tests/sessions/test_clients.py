"""Realtime sessions through the unmodified clients of Cartesia's protocol, on the tiny fixtures of both
families: LiveKit's ``cartesia.TTS`` stream API (push_text / flush / end_input, and barge-in), Pipecat's
``CartesiaTTSService`` in a minimal pipeline, and the ``cartesia`` SDK's WebSocket."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
from cartesia import AsyncCartesia
from livekit.agents.types import USERDATA_TIMED_TRANSCRIPT
from livekit.plugins import cartesia as lk_cartesia

from tests.sessions.conftest import MOSS, Served

FRAME = 1920  # MOSS samples per frame
CASES = [(MOSS, "default"), ("sonic-3", "husein")]  # sonic-*: the default family (NeuCodec here)
IDS = ["moss", "neucodec"]


def livekit_tts(served: Served, http: aiohttp.ClientSession, model: str, voice: str, **kw: Any) -> Any:
    return lk_cartesia.TTS(
        api_key="any", base_url=served.url, model=model, voice=voice, http_session=http, **kw
    )


def audio_of(events: list[Any]) -> tuple[int, set[tuple[int, int]], list[Any]]:
    """(samples, {(rate, channels)}, timed words) of LiveKit's synthesized events."""
    samples, shapes, words = 0, set(), []
    for event in events:
        frame = event.frame
        samples += frame.samples_per_channel
        shapes.add((frame.sample_rate, frame.num_channels))
        words += frame.userdata.get(USERDATA_TIMED_TRANSCRIPT) or []
    return samples, shapes, words


@pytest.mark.parametrize(("model", "voice"), CASES, ids=IDS)
async def test_livekit_stream_push_text_flush_end_input(served: Served, model: str, voice: str) -> None:
    async with aiohttp.ClientSession() as http:
        tts = livekit_tts(served, http, model, voice, sample_rate=16000)
        try:
            stream = tts.stream()
            for word in ["Hello ", "there, ", "my ", "good ", "friend. "]:
                stream.push_text(word)
                await asyncio.sleep(0.01)
            stream.flush()
            stream.push_text("How are you today?")
            stream.end_input()
            events = [event async for event in stream]
            await stream.aclose()
        finally:
            await tts.aclose()
    samples, shapes, words = audio_of(events)
    assert shapes == {(16000, 1)}
    assert samples > 16000 // 2  # more than half a second of speech
    spoken = "".join(w for w in words).split()
    assert spoken[:3] == ["Hello", "there,", "my"]  # LiveKit aligned our words back onto its text
    starts = [w.start_time for w in words]
    assert starts == sorted(starts) and words[-1].end_time <= samples / 16000 + 0.05
    assert await served.metric('tts_realtime_contexts_total{outcome="done"}') >= 1


async def test_livekit_barge_in_releases_everything(served: Served) -> None:
    engine = served.moss.lm.engine  # type: ignore[union-attr]
    async with aiohttp.ClientSession() as http:
        tts = livekit_tts(served, http, MOSS, "default")
        try:
            stream = tts.stream()
            stream.push_text("This answer is long. The user talks over it, so it is cut short. And it ")
            first = await anext(aiter(stream))  # audio is playing
            assert first.frame.samples_per_channel > 0
            await stream.aclose()  # barge-in: the agent drops the stream, LiveKit drops its socket
            second = tts.stream()  # the next reply starts at once
            second.push_text("Sure.")
            second.end_input()
            events = [event async for event in second]
            await second.aclose()
        finally:
            await tts.aclose()
    assert audio_of(events)[0] > 0
    for _ in range(200):
        if engine.active == 0 and await served.metric("tts_realtime_active_contexts") == 0:
            break
        await asyncio.sleep(0.02)
    assert engine.active == 0 and engine.parked == 0
    assert await served.metric("tts_realtime_active_contexts") == 0
    assert await served.metric("tts_active_streams") == 0
    assert await served.metric('tts_realtime_contexts_total{outcome="cancelled"}') >= 1


@pytest.mark.filterwarnings(
    "ignore::DeprecationWarning"
)  # pipecat's: its audioop import, its own base classes
@pytest.mark.parametrize(("model", "voice"), CASES, ids=IDS)
async def test_pipecat_cartesia_service_in_a_pipeline(served: Served, model: str, voice: str) -> None:
    if True:  # pipecat is imported here: its import pulls in much of its framework
        from pipecat.frames.frames import (
            EndFrame,
            ErrorFrame,
            LLMFullResponseEndFrame,
            LLMFullResponseStartFrame,
            LLMTextFrame,
            TTSAudioRawFrame,
            TTSTextFrame,
        )
        from pipecat.pipeline.pipeline import Pipeline
        from pipecat.pipeline.task import PipelineParams
        from pipecat.pipeline.worker import PipelineWorker
        from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
        from pipecat.services.cartesia.tts import CartesiaTTSService
        from pipecat.workers.runner import WorkerRunner

        class Sink(FrameProcessor):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.frames: list[Any] = []
                self.stopped = asyncio.Event()

            async def process_frame(self, frame: Any, direction: FrameDirection) -> None:
                await super().process_frame(frame, direction)
                self.frames.append(frame)
                if type(frame).__name__ == "TTSStoppedFrame":
                    self.stopped.set()
                await self.push_frame(frame, direction)

        tts = CartesiaTTSService(
            api_key="any",
            url=served.ws + "/tts/websocket",
            settings=CartesiaTTSService.Settings(voice=voice, model=model),
            sample_rate=24000,
        )
        sink = Sink()
        task = PipelineWorker(Pipeline([tts, sink]), params=PipelineParams(audio_out_sample_rate=24000))
        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(task)

        async def speak() -> None:
            await asyncio.sleep(0.2)
            words = ["Hello there, ", "my friend. ", "How are ", "you today?"]
            await task.queue_frames(
                [LLMFullResponseStartFrame(), *map(LLMTextFrame, words), LLMFullResponseEndFrame()]
            )
            await asyncio.wait_for(sink.stopped.wait(), 60)
            await asyncio.sleep(0.3)
            await task.queue_frames([EndFrame()])

        await asyncio.wait_for(asyncio.gather(runner.run(), speak()), 90)
    audio = [f for f in sink.frames if isinstance(f, TTSAudioRawFrame)]
    assert audio and {(f.sample_rate, f.num_channels) for f in audio} == {(24000, 1)}
    assert sum(len(f.audio) for f in audio) > 24000  # half a second of 16-bit audio
    assert not [f for f in sink.frames if isinstance(f, ErrorFrame)]
    words = [f.text for f in sink.frames if isinstance(f, TTSTextFrame)]
    assert words[:2] == ["Hello", "there,"]


@pytest.mark.parametrize("encoding", ["pcm_s16le", "pcm_f32le", "pcm_mulaw", "pcm_alaw"])
async def test_cartesia_sdk_websocket_contexts(served: Served, encoding: str) -> None:
    client = AsyncCartesia(api_key="any", websocket_base_url=served.ws)
    rate = 8000
    width = {"pcm_s16le": 2, "pcm_f32le": 4, "pcm_mulaw": 1, "pcm_alaw": 1}[encoding]
    async with client.tts.websocket_connect() as connection:
        context = connection.context(
            model_id=MOSS,
            voice={"mode": "id", "id": "default"},
            output_format={"container": "raw", "encoding": encoding, "sample_rate": rate},
            add_timestamps=True,
        )
        await context.push("The SDK pushes ")
        await context.push("its text in pieces.")
        await context.no_more_inputs()
        audio, kinds = b"", []
        async for event in context.receive():
            kinds.append(event.type)
            if event.type == "chunk":
                audio += event.audio or b""
    await client.close()
    assert kinds[-1] == "done" and "timestamps" in kinds and "error" not in kinds
    assert len(audio) % width == 0
    seconds = len(audio) / width / rate
    assert seconds == pytest.approx(round(seconds / 0.08) * 0.08, abs=0.01)  # whole 80 ms MOSS frames
