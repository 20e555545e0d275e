"""Multi-turn: a MOSS turn in the shared interleave store and the history handed to the prompter."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from app.core.family import Sampling
from app.core.stats import UtteranceStats
from app.families.moss import history
from app.families.moss.family import MossFamily
from app.interleave.turns import Turn as StoredTurn
from app.interleave.turns import retain
from tests.fakes.fake_moss import FRAMES_PER_ID, SYSTEM_ROWS
from tests.families.moss.conftest import Parts, build, moss_settings
from tests.families.moss.test_family import job, speak_all

ROOM = "room-1"


async def say(family: MossFamily, text: str, **fields: object) -> UtteranceStats:
    fields.setdefault("interleave_id", ROOM)
    return (await speak_all(family, job(family, text, **fields)))[1]


def test_a_moss_turn_round_trips_through_json_and_weighs_its_seconds() -> None:
    frames = np.random.default_rng(0).integers(0, 1024, size=(25, 16), dtype=np.int64)
    stored = history.record("anna", "hello there", frames)
    again = StoredTurn.from_obj(json.loads(stored.to_json()))
    assert again == stored and again.voice == "moss:anna" and again.seconds == 2.0 and again.cost == 100
    neucodec = StoredTurn("anna", "hi", (1, 2, 3))
    assert "codes_per_second" not in neucodec.to_json()  # NeuCodec records read as before
    turns = history.turns([neucodec, stored], "anna", 0, lambda text: (len(text),))
    assert len(turns) == 1 and turns[0].text_ids == (11,)
    np.testing.assert_array_equal(turns[0].frames, frames)
    # the history cap weighs seconds: two 2 s MOSS turns are 200 NeuCodec codes' worth
    assert retain([stored, stored, stored], 0, 150) == [stored, stored]


def test_a_broken_turn_ends_the_history() -> None:
    good = history.record("v", "new", np.zeros((2, 16), dtype=np.int64))
    partial = StoredTurn("moss:v", "odd", (1,) * 17, 200)
    (kept,) = history.turns([good, partial, good], "v", 0, lambda t: (len(t),))
    assert kept.text_ids == (3,) and kept.frames.shape == (2, 16)


async def test_turns_on_an_interleave_id_continue_the_conversation(moss: Parts) -> None:
    family, prompter = moss.family, moss.prompter
    first = await say(family, "hello there friend")
    assert first.finish_reason == "stop" and prompter.calls[-1].history == []
    first_frames = moss.engine.frames_for(moss.engine.jobs[-1])
    stored = await family.interleave.inspect(ROOM)
    assert [t.voice for t in stored.turns] == ["moss:default"]
    utterance = await family.plan(job(family, "how are you", interleave_id=ROOM))
    assert utterance.headers()["X-Interleave-Turns"] == "1"
    assert utterance.headers()["X-Interleave-Tokens"] == str(3 * FRAMES_PER_ID)
    (earlier,) = prompter.calls[-1].history
    assert earlier.text_ids == prompter.text_ids("hello there friend")
    np.testing.assert_array_equal(earlier.frames, first_frames)
    assert utterance.job.prefill.shape[0] == SYSTEM_ROWS + 3 + 3 * FRAMES_PER_ID + 3


async def test_retain_turns_and_voices_bound_the_history(moss: Parts) -> None:
    family, prompter = moss.family, moss.prompter
    for text in ("one", "two two", "three three three"):
        await say(family, text)
    await family.plan(job(family, "next", interleave_id=ROOM, retain_turns=2))
    assert [len(turn.text_ids) for turn in prompter.calls[-1].history] == [2, 3]
    await family.plan(job(family, "next", interleave_id=ROOM, retain_turns=0))
    assert len(prompter.calls[-1].history) == 3
    await say(family, "other voice", interleave_id="room-2")
    await family.plan(job(family, "next", interleave_id="room-3"))
    assert prompter.calls[-1].history == []  # another id: nothing


async def test_turns_that_do_not_fit_the_window_are_dropped_oldest_first(tiny_moss_codec_dir: Path) -> None:
    parts = build(moss_settings(tiny_moss_codec_dir), max_positions=60)
    await parts.family.start()
    try:
        for text in ("a b c d", "e f g h"):  # 4 ids + 8 frames = 12 rows each
            await say(parts.family, text)
        # plain: 10 + 2 rows, 48 frames of room; with both turns 36 rows (24 left), with the newest 24
        planned = await parts.family.plan(job(parts.family, "x y", interleave_id=ROOM, sampling=_cap(30)))
        assert [t.text_ids for t in planned.history_turns] == [parts.prompter.text_ids("e f g h")]
        assert planned.job.max_frames == 30
        wide = await parts.family.plan(job(parts.family, "x y", interleave_id=ROOM, sampling=_cap(20)))
        assert len(wide.history_turns) == 2
        none = await parts.family.plan(job(parts.family, "x y", interleave_id=ROOM, sampling=_cap(48)))
        assert none.history_turns == [] and none.job.max_frames == 48
    finally:
        await parts.family.close()


async def test_an_unfinished_turn_is_not_stored(moss: Parts) -> None:
    moss.engine.delay_s = 0.01
    chunks = (await moss.family.plan(job(moss.family, "a b c d e f g h", interleave_id=ROOM))).stream(
        UtteranceStats()
    )
    await anext(chunks)
    await chunks.aclose()
    moss.engine.frames = 10  # "a" fits 3 frames; the engine would make 10
    capped = await say(moss.family, "a", sampling=_cap(3))
    moss.engine.frames = None
    assert capped.finish_reason == "length"
    assert (await moss.family.interleave.inspect(ROOM)).turns == []
    await say(moss.family, "a b", interleave_id=None)
    assert (await moss.family.interleave.inspect(ROOM)).turns == []


def _cap(frames: int) -> Sampling:
    return Sampling(max_tokens=frames, temperature=0.8, repetition_penalty=1.1, top_p=0.6, top_k=30)
