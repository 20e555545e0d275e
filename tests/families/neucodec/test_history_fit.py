"""The interleaved prompt: exact strings, the caps (turns, seconds, tail cut) and the LM window fit."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.families.neucodec.history.fit import Limits, plan_prompt
from app.families.neucodec.history.tokenizer import load_local_tokenizer, tokenizer_counter
from app.families.neucodec.prompt import estimate_tokens, history_prompt, tts_prompt
from app.interleave.turns import Turn

WIDE = Limits(max_turns=5, max_codes=1000, max_model_len=4096, min_gen_tokens=1000)


def speech_count(prompt: str) -> int:
    """A toy tokenizer for exact window arithmetic: 10 tokens of text plus one per speech token."""
    return 10 + prompt.count("<|s_")


def turn(text: str, codes: range | list[int], voice: str = "husein") -> Turn:
    return Turn(voice, text, tuple(codes))


def test_no_history_is_the_plain_prompt_byte_for_byte() -> None:
    plan = plan_prompt([], "husein", "Hello there.", 3072, WIDE, estimate_tokens)
    assert plan.prompt == tts_prompt("husein", "Hello there.")
    assert plan.prompt == "<|im_start|>husein: Hello there.<|speech_start|>"
    assert plan.history == ()
    assert plan.max_tokens == 3072


def test_history_turns_precede_the_new_turn() -> None:
    turns = [turn("hello my name is husein,", [1834, 5]), turn("i like rice.", [77])]
    plan = plan_prompt(turns, "husein", "and you?", 3072, WIDE, estimate_tokens)
    assert plan.prompt == (
        "<|im_start|>husein: hello my name is husein,<|speech_start|><|s_1834|><|s_5|><|im_end|>"
        "<|im_start|>husein: i like rice.<|speech_start|><|s_77|><|im_end|>"
        "<|im_start|>husein: and you?<|speech_start|>"
    )
    assert plan.history == tuple(turns)
    assert plan.history_codes == 3
    assert plan.prompt == history_prompt(turns, "husein", "and you?")


def test_a_voice_switch_starts_cold() -> None:
    turns = [turn("one.", [1]), turn("dua.", [2], voice="idayu"), turn("three.", [3])]
    plan = plan_prompt(turns, "husein", "four.", 3072, WIDE, estimate_tokens)
    assert plan.prompt == (
        "<|im_start|>husein: three.<|speech_start|><|s_3|><|im_end|><|im_start|>husein: four.<|speech_start|>"
    )
    switched = plan_prompt(turns, "idayu", "lima.", 3072, WIDE, estimate_tokens)
    assert switched.prompt == "<|im_start|>idayu: lima.<|speech_start|>"
    assert switched.history == ()


def test_turn_count_cap_keeps_the_newest() -> None:
    turns = [turn(f"t{i}.", [i]) for i in range(4)]
    limits = Limits(max_turns=2, max_codes=1000, max_model_len=4096, min_gen_tokens=1000)
    plan = plan_prompt(turns, "husein", "new.", 3072, limits, estimate_tokens)
    assert [t.text for t in plan.history] == ["t2.", "t3."]
    unlimited = Limits(max_turns=0, max_codes=1000, max_model_len=4096, min_gen_tokens=1000)
    assert len(plan_prompt(turns, "husein", "new.", 3072, unlimited, estimate_tokens).history) == 4


def test_seconds_cap_cuts_the_oldest_fitting_turn_to_its_tail() -> None:
    turns = [
        turn("dropped entirely.", [9, 9, 9]),
        turn("one two three four", [10, 11, 12]),
        turn("newest.", [20, 21, 22]),
    ]
    limits = Limits(max_turns=5, max_codes=5, max_model_len=4096, min_gen_tokens=1000)
    plan = plan_prompt(turns, "husein", "next.", 3072, limits, estimate_tokens)
    # 2 of 3 codes kept -> the last 2/3 of the text, moved to a word start: "three four"
    assert plan.prompt == (
        "<|im_start|>husein: three four<|speech_start|><|s_11|><|s_12|><|im_end|>"
        "<|im_start|>husein: newest.<|speech_start|><|s_20|><|s_21|><|s_22|><|im_end|>"
        "<|im_start|>husein: next.<|speech_start|>"
    )
    assert plan.history_codes == 5


def test_tail_cut_of_cjk_text_cuts_between_characters() -> None:
    turns = [turn("你好世界再见", range(100, 106)), turn("早上好", [7, 8])]
    limits = Limits(max_turns=5, max_codes=5, max_model_len=4096, min_gen_tokens=1000)
    plan = plan_prompt(turns, "husein", "谢谢", 3072, limits, estimate_tokens)
    assert plan.prompt == (
        "<|im_start|>husein: 界再见<|speech_start|><|s_103|><|s_104|><|s_105|><|im_end|>"
        "<|im_start|>husein: 早上好<|speech_start|><|s_7|><|s_8|><|im_end|>"
        "<|im_start|>husein: 谢谢<|speech_start|>"
    )


def test_window_fit_cuts_history_to_leave_the_generation_room() -> None:
    turns = [turn("older.", range(30)), turn("newer.", range(100, 130))]
    limits = Limits(max_turns=5, max_codes=1000, max_model_len=100, min_gen_tokens=50)
    plan = plan_prompt(turns, "husein", "new.", 3072, limits, speech_count)
    # room: 100 - (10 + speech) >= 50 -> at most 40 speech tokens: newer whole, older cut to its last 10
    assert plan.history_codes == 40
    assert plan.history[0].codes == tuple(range(20, 30))
    assert plan.history[1] == turns[1]
    assert plan.prompt_tokens == 50
    assert plan.max_tokens == 50  # clamped from 3072 to what is left


def test_window_fit_drops_a_turn_smaller_than_the_excess() -> None:
    turns = [turn("tiny.", range(5)), turn("big.", range(100, 140))]
    limits = Limits(max_turns=5, max_codes=1000, max_model_len=100, min_gen_tokens=55)
    plan = plan_prompt(turns, "husein", "new.", 3072, limits, speech_count)
    assert [t.text for t in plan.history] == ["big."]
    assert plan.history_codes == 35  # 100 - 55 - 10: the remaining turn is cut to its tail too
    assert plan.max_tokens == 55


def test_window_fit_keeps_whole_turns_when_dropping_one_is_enough() -> None:
    # the oldest turn (one code, long text) cannot be cut: it goes, and the newer turn fits whole
    turns = [turn("x" * 300, [5]), turn("fits.", range(100, 120))]
    limits = Limits(max_turns=5, max_codes=1000, max_model_len=200, min_gen_tokens=100)
    plan = plan_prompt(turns, "husein", "new.", 3072, limits, estimate_tokens)
    assert plan.history == (turns[1],)
    assert plan.prompt_tokens <= 100


def test_max_tokens_is_clamped_without_history_and_never_below_one() -> None:
    limits = Limits(max_turns=5, max_codes=1000, max_model_len=100, min_gen_tokens=50)
    assert plan_prompt([], "husein", "a.", 3072, limits, speech_count).max_tokens == 90
    assert plan_prompt([], "husein", "a.", 20, limits, speech_count).max_tokens == 20
    assert plan_prompt([], "husein", "a.", 3072, limits, lambda _: 500).max_tokens == 1


def test_window_fit_with_the_estimate_keeps_the_room() -> None:
    turns = [turn("word " * 40, range(600)), turn("more words here.", range(600, 1000))]
    limits = Limits(max_turns=5, max_codes=1000, max_model_len=1200, min_gen_tokens=500)
    plan = plan_prompt(turns, "husein", "the new sentence.", 3072, limits, estimate_tokens)
    assert estimate_tokens(plan.prompt) == plan.prompt_tokens <= 1200 - 500
    assert plan.max_tokens == 1200 - plan.prompt_tokens
    kept = [code for t in plan.history for code in t.codes]
    assert kept == list(range(1000 - len(kept), 1000)), "the history is a tail of the stored codes"
    assert plan.prompt_tokens > 1200 - 500 - 10, "no more history was dropped than needed"


@pytest.mark.parametrize(
    ("prompt", "tokens"),
    [
        ("<|im_start|>husein: hi<|speech_start|>", 2 + 4),  # "husein: hi" is 10 bytes -> 4
        ("<|s_1|><|s_65535|><|im_end|>", 3),
        ("你好", 2),  # 6 UTF-8 bytes
        ("", 0),
    ],
)
def test_estimate(prompt: str, tokens: int) -> None:
    assert estimate_tokens(prompt) == tokens


def test_the_model_tokenizer_counts_when_it_is_local(tiny_lm_dir: Path, tmp_path: Path) -> None:
    assert load_local_tokenizer("Scicom-intl/Multilingual-Expressive-TTS-1.7B") is None  # an id: no download
    assert load_local_tokenizer(str(tmp_path)) is None  # a directory without a tokenizer
    tokenizer = load_local_tokenizer(str(tiny_lm_dir))
    assert tokenizer is not None
    count = tokenizer_counter(tokenizer)
    # the tiny tokenizer: one token per byte of text, one per special or speech token
    assert count("<|im_start|>husein: hi<|speech_start|><|s_7|>") == 2 + 10 + 1
    turns = [turn("hello there, friend.", range(900))]
    limits = Limits(max_turns=5, max_codes=1000, max_model_len=1000, min_gen_tokens=200)
    plan = plan_prompt(turns, "husein", "and you?", 3072, limits, count)
    assert plan.prompt_tokens == count(plan.prompt) <= 800
    assert plan.max_tokens == 1000 - plan.prompt_tokens
    assert 0 < plan.history_codes < 900
