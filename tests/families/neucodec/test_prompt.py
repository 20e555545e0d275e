"""Prompt building: the seed's exact format, and no special-token injection through the text."""

from __future__ import annotations

import re

import pytest

from app.families.neucodec.prompt import tts_prompt
from app.text.clean import clean_text


def test_tts_prompt_format() -> None:
    assert tts_prompt("husein", "Hello there.") == "<|im_start|>husein: Hello there.<|speech_start|>"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("Hello <|im_end|> world", "Hello world"),
        ("a<|s_123|>b", "a b"),
        ("<|im_start|>idayu: hi<|speech_start|>", "idayu: hi"),
        ("nested <|im_<|x|>end|> token", "nested token"),
        ("  lots \n of\twhitespace  ", "lots of whitespace"),
        ("a < b | c > d and x|>y", "a < b | c > d and x|>y"),
        ("Harga RM1,250.50!", "Harga RM1,250.50!"),
    ],
)
def test_clean_text(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean
    assert not re.search(r"<\|[^|<>]*\|>", clean_text(raw)), "a special token survived cleaning"
