"""MossPrompter's rows against hand-built expectations (a character tokenizer whose ids we can write
down), and once through the fixture's real tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.families.moss.lm.prompt import SYSTEM_PROMPT, MossPrompter
from app.families.moss.lm.types import FrameSampling, SpecialIds, Turn

SPECIAL = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "<|audio_pad|>": 3, "<|text_pad|>": 4}
IDS = SpecialIds(im_start=1, im_end=2, audio_pad=3, text_pad=4, pad=0)
PAD, BOS, EOS = 1024, 1025, 1026


class CharTokenizer:
    """One id per character (100 + code point); the special strings are one id each unless split."""

    def __call__(self, text: str, add_special_tokens: bool = True, split_special_tokens: bool = False) -> Any:
        ids: list[int] = []
        i = 0
        while i < len(text):
            special = next((s for s in SPECIAL if text.startswith(s, i)), None)
            if special is not None and not split_special_tokens:
                ids.append(SPECIAL[special])
                i += len(special)
            else:
                ids.append(100 + ord(text[i]))
                i += 1
        return {"input_ids": ids}


def chars(text: str) -> list[int]:
    return [100 + ord(c) for c in text]


def rows(text_ids: list[int]) -> list[list[int]]:
    return [[t] + [PAD] * 16 for t in text_ids]


SYSTEM_TEXT = (
    "system\nYou are a highly expressive text-to-speech (TTS) engine developed by Mosi "
    "Intelligence. \nYou possess natural language understanding, emotional modeling, and "
    "multi-style speech generation capabilities, allowing you to generate the corresponding "
    "speech based on the text given in the assistant."
)
SYSTEM = rows([1, *chars(SYSTEM_TEXT), 2, *chars("\n")])
FIRST = rows([1, *chars("assistant\n")])
LATER = rows([2, *chars("\n"), 1, *chars("assistant\n")])


def frames(n: int, base: int) -> np.ndarray:
    return (np.arange(n * 16).reshape(n, 16) + base) % 1024


@pytest.fixture
def prompter() -> MossPrompter:
    return MossPrompter(CharTokenizer(), IDS)


def test_system_prompt_is_the_upstream_string(prompter: MossPrompter) -> None:
    assert len(SYSTEM) == len(CharTokenizer()(SYSTEM_PROMPT)["input_ids"])
    assert np.array_equal(prompter.system_rows(None), np.array(SYSTEM))


def test_long_text_prefills_twelve_tokens_and_feeds_the_rest(prompter: MossPrompter) -> None:
    text = "abcdefghijklmnop"  # 16 tokens >= 12
    job = prompter.job(text, reference=None, max_frames=7)
    expected = SYSTEM + FIRST + rows(chars("abcdefghijkl"))
    expected[-1][1] = BOS  # BOS in column 1 of the 12th text row
    assert np.array_equal(job.prefill, np.array(expected))
    assert job.text_tail == tuple(chars("mnop"))
    assert job.max_frames == 7 and job.sampling == FrameSampling()


def test_exactly_twelve_tokens_leave_no_tail(prompter: MossPrompter) -> None:
    job = prompter.job("abcdefghijkl", reference=None, max_frames=1)
    assert job.prefill[-1, 0] == chars("l")[0] and job.prefill[-1, 1] == BOS
    assert job.text_tail == ()


def test_short_text_prefills_all_of_it_never_more(prompter: MossPrompter) -> None:
    job = prompter.job("hey", reference=None, max_frames=3)
    expected = SYSTEM + FIRST + rows(chars("hey"))
    expected[-1][1] = BOS
    assert np.array_equal(job.prefill, np.array(expected))
    assert job.text_tail == ()


def test_reference_frames_fill_the_audio_pad_rows(prompter: MossPrompter) -> None:
    ref = frames(3, 5)
    job = prompter.job("hey", reference=ref, max_frames=3)
    voice = rows(
        [1, *chars("context\nThe assistant section should be synthesized using the following voice timbre:")]
    )
    voice += [[3, *ref[k].tolist()] for k in range(3)]
    voice += rows([2, *chars("\n")])
    expected = SYSTEM + voice + FIRST + rows(chars("hey"))
    expected[-1][1] = BOS
    assert np.array_equal(job.prefill, np.array(expected))


def test_history_turns_are_laid_out_as_trained(prompter: MossPrompter) -> None:
    long_turn = Turn(text_ids=tuple(chars("abcdefghijklmn")), frames=frames(2, 7))  # L=14 >= 12, A=2
    short_turn = Turn(text_ids=tuple(chars("xy")), frames=frames(3, 100))  # L=2 < 12, A=3
    job = prompter.job("hello", reference=None, history=[long_turn, short_turn], max_frames=4)
    first = FIRST + rows([*chars("abcdefghijklmn"), 4])  # L + (A + 13 - L) = 15 rows after the prefix
    first[len(FIRST) + 11][1] = BOS  # beside the 12th text token
    first[len(FIRST) + 12][1:] = long_turn.frames[0].tolist()  # beside 'm'
    first[len(FIRST) + 13][1:] = long_turn.frames[1].tolist()  # beside 'n'
    first[len(FIRST) + 14][1] = EOS  # the EOS row, text pad
    second = LATER + rows([*chars("xy"), 4, 4, 4, 4])  # L + A + 1 pads
    second[len(LATER) + 1][1] = BOS  # on the last text row
    for k in range(3):
        second[len(LATER) + 2 + k][1:] = short_turn.frames[k].tolist()
    second[len(LATER) + 5][1] = EOS
    new = LATER + rows(chars("hello"))
    new[-1][1] = BOS
    assert np.array_equal(job.prefill, np.array(SYSTEM + first + second + new))


def test_long_history_text_keeps_its_rows_past_the_eos(prompter: MossPrompter) -> None:
    turn = Turn(text_ids=tuple(chars("abcdefghijklmnopq")), frames=frames(1, 0))  # L=17 > A + 13
    rows_ = prompter.turn_rows(turn, first=True)
    start = len(FIRST)
    assert len(rows_) == start + 17  # no pads: the text column is already long enough
    assert rows_[start + 11, 1] == BOS and rows_[start + 13, 1] == EOS
    assert np.array_equal(rows_[start + 12, 1:], turn.frames[0])


def test_text_that_spells_a_special_token_stays_text(prompter: MossPrompter) -> None:
    assert prompter.text_ids("a<|im_end|>") == tuple(chars("a<|im_end|>"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": "", "reference": None}, "no tokens"),
        ({"text": "a", "reference": np.zeros((2, 8), dtype=np.int64)}, r"\(F, 16\)"),
        ({"text": "a", "reference": np.full((2, 16), 1024)}, "outside"),
        ({"text": "a", "reference": np.zeros((0, 16), dtype=np.int64)}, "no frames"),
    ],
)
def test_bad_inputs_are_refused(prompter: MossPrompter, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        prompter.job(max_frames=1, **kwargs)


def test_the_fixture_tokenizer_gives_the_same_structure(moss_tts_dir: Path) -> None:
    from transformers import AutoTokenizer

    from app.families.moss.lm.config import read_config
    from app.families.moss.lm.loader import special_ids

    tokenizer = AutoTokenizer.from_pretrained(str(moss_tts_dir))
    ids = special_ids(tokenizer, read_config(moss_tts_dir))
    prompter = MossPrompter(tokenizer, ids)
    assert ids.im_end not in prompter.text_ids("Bye<|im_end|>")  # spelled out, not the special token
    assert ids.im_end in tokenizer("Bye<|im_end|>")["input_ids"]
    ref = frames(4, 3)
    for text in ("Selamat pagi, apa khabar semua?", "你好", "வணக்கம் உலகம்", "Hi"):
        job = prompter.job(text, reference=ref, max_frames=2)
        text_ids = prompter.text_ids(text)
        lead = min(len(text_ids), 12)
        audio_rows = np.flatnonzero(job.prefill[:, 0] == ids.audio_pad)
        assert np.array_equal(job.prefill[audio_rows, 1:], ref)
        assert job.prefill[-1, 1] == BOS and (job.prefill[:, 1] == BOS).sum() == 1
        assert tuple(job.prefill[-lead:, 0]) == text_ids[:lead]
        assert job.text_tail == text_ids[lead:]
        assert job.prefill[0, 0] == ids.im_start
