"""A realtime turn of the NeuCodec family: segments cut at sentence and clause ends, each generated with
the earlier ones as interleave turns while the one before plays, joined as a long input's parts are; its
audio equals the long-input path's for the same segments and seeds, and so do the LM's prompts."""

from __future__ import annotations

import asyncio
import itertools

import numpy as np

from app.audio.splice import width_samples
from app.core.constants import SAMPLE_RATE
from app.core.family import Sampling, SpeechJob, SpokenPiece, StreamJob, WordTiming
from app.core.stats import UtteranceStats
from app.families.neucodec.utterance import NeuCodecUtterance
from app.text.stream_split import StreamSplitter
from tests.conftest import make_settings
from tests.fakes.fake_vllm import FakeVLLM
from tests.families.shared.test_long_input import fake_vllm, family_on  # noqa: F401 (a fixture)

TEXT = (
    "Thanks for waiting, I found your order. It shipped on Monday; the courier says it arrives "
    "tomorrow morning, before noon. Anything else I can help with?"
)
SAMPLING = Sampling(3072, 0.6, 1.15, seed=7)


async def test_a_context_speaks_as_the_long_input_of_its_segments(fake_vllm: FakeVLLM) -> None:  # noqa: F811
    settings = make_settings(LM_BACKEND="http", TTS_API=fake_vllm.url, DEVICE="cpu")
    family = await family_on(settings)
    try:
        stream = await family.open_stream(StreamJob("TTS-model", "husein", SAMPLING))
        stats = UtteranceStats()
        items: list[np.ndarray | WordTiming] = []

        async def listen() -> None:
            async for item in stream.stream(stats):
                items.append(item)

        listening = asyncio.create_task(listen())
        splitter = StreamSplitter()
        for start in range(0, len(TEXT), 7):  # deltas while the earlier segments already play
            for piece in splitter.push(TEXT[start : start + 7]):
                stream.push(SpokenPiece(piece.text, piece.text, piece.kind, piece.spaced))
            await asyncio.sleep(0.01)
        for piece in splitter.end():
            stream.push(SpokenPiece(piece.text, piece.text, piece.kind, piece.spaced))
        stream.end()
        await listening
        streamed = np.concatenate([item for item in items if isinstance(item, np.ndarray)])
        streamed_prompts = [request.body["prompt"] for request in fake_vllm.requests]
        segments = list(stream.segments.texts)

        request = SpeechJob("TTS-model", "", "husein", SAMPLING)
        parts = [family.segment_part(request, text, k) for k, text in enumerate(segments)]
        first = await family.conversations.fresh("", "husein", parts[0].text, parts[0].params, 0)
        schedule = family.schedule(settings.DEFAULT_PLAYBACK_SPEED, settings.DEFAULT_PLAYBACK_OVERLAP_SPEED)
        crossfade = width_samples(settings.LONG_INPUT_CROSSFADE_MS)
        long_input = NeuCodecUtterance(family, parts, schedule, first, {}, crossfade)
        whole = np.concatenate([chunk async for chunk in long_input.stream(UtteranceStats())])
        long_prompts = [request.body["prompt"] for request in fake_vllm.requests[len(streamed_prompts) :]]
    finally:
        await family.close()
    assert segments == [
        "Thanks for waiting,",
        "I found your order.",
        "It shipped on Monday; the courier says it arrives tomorrow morning,",
        "before noon.",
        "Anything else I can help with?",
    ]
    assert np.array_equal(streamed, whole)
    assert streamed_prompts == long_prompts
    assert segments[0] in streamed_prompts[2] and segments[1] in streamed_prompts[2]  # earlier turns
    words = [item for item in items if isinstance(item, WordTiming)]
    assert [w.word for w in words] == TEXT.split()
    assert words[0].start == 0 and words[-1].end == round(len(streamed) / SAMPLE_RATE, 4)
    assert all(a.end <= b.start + 1e-4 for a, b in itertools.pairwise(words))
