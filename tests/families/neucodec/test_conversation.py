"""NeuCodec's conversations: what is committed, store failures, the fallback rule, the token counter."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from app.core.stats import UtteranceStats
from app.core.types import FinishReason
from app.families.neucodec.history.conversation import Conversations, min_plausible_codes, speech_units
from app.families.neucodec.lm.types import GenerationParams
from app.families.neucodec.prompt import estimate_tokens, tts_prompt
from app.interleave.service import Interleave
from app.interleave.stores.base import History, StoreError
from app.interleave.stores.memory import MemoryStore
from app.interleave.turns import Turn
from tests.conftest import make_settings


def params(text: str, max_tokens: int = 3072) -> GenerationParams:
    return GenerationParams(tts_prompt("husein", text), "TTS-model", max_tokens, 0.6, 1.15)


def stats(finish: FinishReason | None, tokens: list[int]) -> UtteranceStats:
    return UtteranceStats(codes=len(tokens), finish_reason=finish, tokens=tokens)


class FailingStore:
    """A store whose backend is down."""

    name = "failing"

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def load(self, interleave_id: str) -> History:
        raise StoreError("down")

    async def append(self, interleave_id: str, turn: Turn, keep: int) -> None:
        raise StoreError("down")

    async def delete(self, interleave_id: str) -> bool:
        raise StoreError("down")


def service(store: Any = None, **settings: object) -> Conversations:
    s = make_settings(**settings)
    return Conversations(s, Interleave(s, store if store is not None else MemoryStore(600, 1000)))


async def committed(conversations: Conversations, interleave_id: str = "room") -> list[Turn]:
    """The id's turns once its background commits have landed."""
    return (await conversations.interleave.inspect(interleave_id)).turns


async def test_a_finished_turn_is_committed_with_its_text_tokens_and_voice() -> None:
    interleave = service()
    turn = await interleave.prepare("room", "husein", "Hello there.", params("Hello there."), keep=5)
    interleave.commit(turn, stats("stop", [5, 6, 7]))
    assert await committed(interleave) == [Turn("husein", "Hello there.", (5, 6, 7))]
    assert interleave.interleave.counters.commits == 1


@pytest.mark.parametrize(
    ("finish", "tokens"),
    [("length", [1, 2]), ("cancelled", [1, 2]), ("error", [1, 2]), (None, [1, 2]), ("stop", [])],
)
async def test_only_a_normal_stop_with_tokens_is_committed(
    finish: FinishReason | None, tokens: list[int]
) -> None:
    interleave = service()
    turn = await interleave.prepare("room", "husein", "Hi.", params("Hi."), keep=5)
    interleave.commit(turn, stats(finish, tokens))
    assert await committed(interleave) == []


async def test_the_next_request_sees_the_previous_commit() -> None:
    interleave = service()
    first = await interleave.prepare("room", "husein", "One.", params("One."), keep=5)
    interleave.commit(first, stats("stop", [1, 2]))
    second = await interleave.prepare("room", "husein", "Two.", params("Two."), keep=5)  # no await between
    assert second.history == (Turn("husein", "One.", (1, 2)),)
    assert second.params.prompt == (
        "<|im_start|>husein: One.<|speech_start|><|s_1|><|s_2|><|im_end|>"
        "<|im_start|>husein: Two.<|speech_start|>"
    )
    assert second.cold_params.prompt == tts_prompt("husein", "Two.")
    assert second.headers() == {  # the id itself is the plan's header: the client named it
        "X-Interleave-Turns": "1",
        "X-Interleave-Tokens": "2",
    }
    interleave.commit(second, stats("stop", [3]))
    for i in range(3, 6):  # several commits in flight land in order
        interleave.commit(second, stats("stop", [i]))
    assert [t.codes for t in await committed(interleave)] == [(1, 2), (3,), (3,), (4,), (5,)]


async def test_store_failures_go_cold_and_are_counted() -> None:
    interleave = service(FailingStore())
    turn = await interleave.prepare("room", "husein", "Hello.", params("Hello."), keep=5)
    assert turn.history == () and turn.params.prompt == tts_prompt("husein", "Hello.")
    assert interleave.interleave.counters.load_failures == 1
    interleave.commit(turn, stats("stop", [1]))
    await interleave.close()
    assert interleave.interleave.counters.commit_failures == 1
    assert interleave.interleave.counters.commits == 0


async def test_prepare_fits_the_window_and_clamps_max_tokens() -> None:
    store = MemoryStore(600, 1000)
    await store.append("room", Turn("husein", "before.", tuple(range(800))), keep=5)
    interleave = service(store, LM_MAX_MODEL_LEN=1200, INTERLEAVE_MIN_GEN_TOKENS=500)
    turn = await interleave.prepare("room", "husein", "Now.", params("Now."), keep=5)
    prompt_tokens = estimate_tokens(turn.params.prompt)
    assert prompt_tokens <= 700
    assert turn.params.max_tokens == 1200 - prompt_tokens
    assert 0 < sum(len(t.codes) for t in turn.history) < 800
    assert (
        turn.cold_params.max_tokens == 3072 - 0
        if False
        else 1200 - estimate_tokens(tts_prompt("husein", "Now."))
    )


@pytest.mark.parametrize(
    ("text", "units"),
    [
        ("Hello there, how can I help you?", 7),
        ("你好，世界。", 4),
        ("Harga RM1,250.50 sahaja!", 3),
        ("我爱 Kuala Lumpur", 4),
        ("... !!", 0),
    ],
)
def test_speech_units(text: str, units: int) -> None:
    assert speech_units(text) == units


def test_min_plausible_codes_is_4_per_unit_within_10_to_50() -> None:
    assert min_plausible_codes("Hi.") == 10
    assert min_plausible_codes("one two three four five") == 20
    assert min_plausible_codes("word " * 100) == 50
    assert min_plausible_codes("你好世界") == 16


async def test_fallback_is_decided_only_with_history() -> None:
    store = MemoryStore(600, 1000)
    await store.append("room", Turn("husein", "before.", (1, 2, 3)), keep=5)
    interleave = service(store)
    text = "one two three four five"
    turn = await interleave.prepare("room", "husein", text, params(text), keep=5)
    assert turn.hold_codes == 20
    assert turn.falls_back(stats("stop", [0] * 19))
    assert not turn.falls_back(stats("stop", [0] * 20))
    assert not turn.falls_back(stats("length", [0] * 5)), "a cut is not an early stop"
    assert not turn.falls_back(stats(None, [0] * 5)), "undecided while the LM runs"
    cold = turn.cold()
    assert cold.params == turn.cold_params and cold.history == () and cold.hold_codes == 0
    assert cold.headers()["X-Interleave-Turns"] == "0"
    without = service(store, INTERLEAVE_FALLBACK=False)
    assert (await without.prepare("room", "husein", text, params(text), keep=5)).hold_codes == 0
    first = await interleave.prepare("new", "husein", text, params(text), keep=5)
    assert first.hold_codes == 0, "no history: nothing to fall back from"


async def test_inspect_and_forget_wait_for_pending_commits() -> None:
    interleave = service()
    turn = await interleave.prepare("room", "husein", "One.", params("One."), keep=5)
    interleave.commit(turn, stats("stop", [1]))
    assert [t.text for t in (await interleave.interleave.inspect("room")).turns] == ["One."]
    interleave.commit(turn, stats("stop", [2]))
    assert await interleave.interleave.forget("room") is True
    await asyncio.sleep(0)
    assert (await interleave.interleave.inspect("room")).turns == [], (
        "a late commit does not resurrect the id"
    )


class _Source:
    def __init__(self, tokenizer: object | None) -> None:
        self.tokenizer = tokenizer


async def test_the_counter_is_the_tokenizer_when_one_is_at_hand(tiny_lm_dir: Path) -> None:
    interleave = service()
    await interleave.start(_Source(None))
    assert interleave.count is estimate_tokens  # transformers backend without a tokenizer yet, http id
    local = service(LM_BACKEND="http", TTS_MODEL=str(tiny_lm_dir))
    await local.start(_Source(None))
    prompt = "<|im_start|>husein: hi<|speech_start|>"
    assert local.count(prompt) == 12 != estimate_tokens(prompt)  # the tiny tokenizer: a token per byte
    settings = make_settings(INTERLEAVE_STORE="off")
    off = Conversations(settings, Interleave(settings, None))
    await off.start(_Source(None))
    assert not off.enabled
    await off.close()
