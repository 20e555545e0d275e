"""SpeechTokenParser: incremental ``<|s_N|>`` parsing; format_speech_tokens: the inverse."""

from __future__ import annotations

import pytest

from app.families.neucodec.speech_tokens import SpeechTokenError, SpeechTokenParser, format_speech_tokens

CODES = [0, 7, 53404, 65535, 12, 12, 900]
TEXT = "<|s_0|><|s_7|>junk<|s_53404|><|im_end|><|s_65535|><|s_12|> <<|s_12|><|s|><|s_900|>"


def test_complete_tokens_in_one_piece() -> None:
    assert SpeechTokenParser().feed(TEXT) == CODES


@pytest.mark.parametrize("cut", range(len(TEXT) + 1))
def test_any_cut_into_two_pieces_gives_the_same_codes(cut: int) -> None:
    parser = SpeechTokenParser()
    assert parser.feed(TEXT[:cut]) + parser.feed(TEXT[cut:]) == CODES


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8])
def test_small_pieces_give_the_same_codes(size: int) -> None:
    parser = SpeechTokenParser()
    codes: list[int] = []
    for start in range(0, len(TEXT), size):
        codes += parser.feed(TEXT[start : start + size])
    assert codes == CODES


def test_a_token_completes_only_when_its_closing_bracket_arrives() -> None:
    parser = SpeechTokenParser()
    assert parser.feed("<|s_12") == []
    assert parser.feed("3|") == []
    assert parser.feed(">") == [123]


@pytest.mark.parametrize(
    "text",
    ["<|im_end|>", "hello world", "<|s_x|>", "<|s_|>", "<|s_12a|>", "<|speech_start|>", "<s_1>", "|s_1|>"],
)
def test_text_that_is_no_speech_token_is_dropped(text: str) -> None:
    parser = SpeechTokenParser()
    assert parser.feed(text) == []
    assert parser.feed("<|s_5|>") == [5]


def test_a_broken_prefix_is_not_completed_later() -> None:
    parser = SpeechTokenParser()
    assert parser.feed("<|s_12a") == []
    assert parser.feed("3|>") == []


def test_long_junk_is_not_carried_over() -> None:
    parser = SpeechTokenParser()
    assert parser.feed("<" * 100_000 + "<|s_4") == []
    assert parser.feed("2|>" + "x" * 100_000) == [42]


@pytest.mark.parametrize("token", ["<|s_65536|>", "<|s_123456789|>"])
def test_out_of_range_code_is_rejected(token: str) -> None:
    parser = SpeechTokenParser()
    with pytest.raises(SpeechTokenError, match="outside"):
        parser.feed("<|s_1|>" + token)


def test_out_of_range_code_split_across_pieces_is_rejected() -> None:
    parser = SpeechTokenParser()
    assert parser.feed("<|s_7000") == []
    with pytest.raises(SpeechTokenError):
        parser.feed("0|>")


def test_format_round_trips() -> None:
    text = format_speech_tokens(CODES)
    assert text == "".join(f"<|s_{code}|>" for code in CODES)
    assert SpeechTokenParser().feed(text) == CODES
    assert format_speech_tokens([]) == ""


@pytest.mark.parametrize("codes", [[-1], [65536], [1, 2, 70000]])
def test_format_rejects_out_of_range_codes(codes: list[int]) -> None:
    with pytest.raises(ValueError, match=r"0\.\.65535"):
        format_speech_tokens(codes)
