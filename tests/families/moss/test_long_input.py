"""Long inputs through the MOSS family, on the tiny MOSS codec with the stand-in LM stage: parts that fit
the frame budget, every part's audio in order, seeds and history per part, summed stats, and a stream
closed mid-way that starts no further part.

A small ``max_tokens`` (20 frames, 1.6 s: 16 characters at the slow pace) forces short texts into parts.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np

from app.audio.splice import splice, width_samples
from app.core.family import ReferenceVoice, Sampling
from app.core.stats import UtteranceStats
from app.families.moss.family import FRAMES_PER_SECOND
from app.families.shared.long_input import part_seed
from app.text.duration import speech_seconds
from tests.fakes.fake_moss import FRAMES_PER_ID, SYSTEM_ROWS
from tests.families.moss.conftest import Parts, build, moss_settings
from tests.families.moss.test_family import FRAME, job, speak_all

TEXT = "One two three. Four five six. Seven eight, nine ten eleven twelve."
PARTS = ["One two three.", "Four five six.", "Seven eight,", "nine ten eleven", "twelve."]
CAP = 20


def capped(seed: int | None = 7, frames: int = CAP) -> Sampling:
    return Sampling(
        max_tokens=frames, temperature=0.8, repetition_penalty=1.1, top_p=0.6, top_k=30, seed=seed
    )


async def test_a_long_input_is_its_parts_generated_alone_and_spliced(moss: Parts) -> None:
    family, engine = moss.family, moss.engine
    utterance = await family.plan(job(family, TEXT, sampling=capped()))
    texts = [part.text for part in utterance.parts]
    assert texts == PARTS
    for text in texts:  # every part's slow estimate fits max_tokens
        assert speech_seconds(text) * FRAMES_PER_SECOND <= CAP
    stats = UtteranceStats()
    audio = np.concatenate([chunk async for chunk in utterance.stream(stats)])
    jobs = list(engine.jobs)
    assert [j.sampling.seed for j in jobs] == [part_seed(7, k) for k in range(len(texts))]
    alone = [  # each part as a request of its own, with the part's seed
        (await speak_all(family, job(family, text, sampling=capped(part_seed(7, k)))))[0]
        for k, text in enumerate(texts)
    ]
    width = width_samples(family.settings.LONG_INPUT_CROSSFADE_MS)
    assert len(audio) == sum(len(a) for a in alone) - (len(texts) - 1) * width == stats.samples
    np.testing.assert_allclose(audio, splice(alone, width), atol=1e-5)
    frames = [len(text.split()) * FRAMES_PER_ID for text in texts]
    assert [len(a) for a in alone] == [n * FRAME for n in frames]
    assert stats.codes == sum(frames) and stats.finish_reason == "stop"
    assert stats.prompt_tokens == sum(len(j.prefill) for j in jobs)
    assert engine.open_rows == 0 and family.codec is not None and family.codec.live_streams == 0


async def test_a_part_read_ahead_waits_for_a_codec_stream_instead_of_failing(
    tiny_moss_codec_dir: Path,
) -> None:
    settings = moss_settings(tiny_moss_codec_dir, MOSS_CODEC_MAX_STREAMS=1, MOSS_FIRST_CHUNK_FRAMES=4)
    parts = build(settings)  # a part of 6 frames: 4 decoded, then 2 after the next part has started
    family = parts.family
    await family.start()
    stats, chunks = UtteranceStats(), []
    try:
        utterance = await family.plan(job(family, TEXT, sampling=capped()))
        async for chunk in utterance.stream(stats):  # a slow listener: the next part decodes meanwhile
            chunks.append(chunk)
            await asyncio.sleep(0.02)
        assert family.codec is not None and family.codec.live_streams == 0
    finally:
        await family.close()
    assert len(parts.engine.jobs) == len(PARTS) and stats.finish_reason == "stop"
    assert sum(len(chunk) for chunk in chunks) == stats.samples > 0


async def test_each_later_part_is_prompted_with_the_part_before_it(moss: Parts) -> None:
    family, engine, prompter = moss.family, moss.engine, moss.prompter
    await speak_all(family, job(family, "One two three. Four five six.", sampling=capped()))
    first, second = engine.jobs
    (turn,) = prompter.calls[-1].history  # the second part's job, built once the first had its frames
    assert turn.text_ids == prompter.text_ids("One two three.")
    np.testing.assert_array_equal(turn.frames, engine.frames_for(first))
    assert len(second.prefill) == SYSTEM_ROWS + 3 + 3 * FRAMES_PER_ID + 3
    assert second.max_frames == CAP and second.sampling.seed == part_seed(7, 1)


async def test_a_part_cut_by_max_tokens_is_no_history(moss: Parts) -> None:
    moss.engine.frames = 50  # every part runs to max_tokens ("length")
    stats = (
        await speak_all(moss.family, job(moss.family, "One two three. Four five six.", sampling=capped()))
    )[1]
    assert [call.history for call in moss.prompter.calls[-2:]] == [[], []]
    assert (stats.codes, stats.finish_reason) == (2 * CAP, "length")


async def test_a_text_that_fits_is_one_part_with_the_request_seed(moss: Parts) -> None:
    utterance = await moss.family.plan(job(moss.family, "One two three.", sampling=capped()))
    assert len(utterance.parts) == 1 and utterance.job.sampling.seed == 7 and utterance.job.max_frames == CAP
    stats = (await speak_all(moss.family, job(moss.family, "One two three.", sampling=capped())))[1]
    assert stats.codes == 3 * FRAMES_PER_ID and len(moss.engine.jobs) == 1


async def test_every_part_speaks_in_the_reference_voice(moss: Parts) -> None:
    codes = np.arange(4 * 16, dtype=np.int64) % 1024
    voice = ReferenceVoice("", tuple(codes.tolist()), 16)
    await speak_all(moss.family, job(moss.family, TEXT, voice=voice, sampling=capped()))
    assert len(moss.prompter.calls) > len(PARTS)  # the candidates tried while cutting, then the parts
    for call in moss.prompter.calls:
        assert call.reference is not None
        np.testing.assert_array_equal(call.reference, codes.reshape(4, 16))


async def test_each_finished_part_is_a_turn_on_the_interleave_id(moss: Parts) -> None:
    await speak_all(moss.family, job(moss.family, TEXT, sampling=capped(), interleave_id="room"))
    turns = (await moss.family.interleave.inspect("room")).turns
    assert [turn.text for turn in turns] == PARTS
    assert [len(turn.codes) for turn in turns] == [16 * FRAMES_PER_ID * n for n in (3, 3, 2, 3, 1)]


async def test_closing_mid_way_starts_no_further_part(moss: Parts) -> None:
    family, engine = moss.family, moss.engine
    engine.delay_s = 0.02
    stats = UtteranceStats()
    utterance = await family.plan(job(family, TEXT, sampling=capped()))
    chunks = utterance.stream(stats)
    await anext(chunks)
    await chunks.aclose()
    await asyncio.sleep(0.2)  # time for parts that would still start
    assert 1 <= len(engine.jobs) <= 2 < len(utterance.parts)  # the part playing, at most one ahead
    assert engine.open_rows == 0 and family.codec is not None and family.codec.live_streams == 0
    assert stats.finish_reason == "cancelled"
