"""strip_invisible: controls become spaces, invisible format characters go, everything else stays."""

from __future__ import annotations

import sys
import unicodedata

import pytest
import regex

from app.text.invisible import strip_invisible
from app.text.rule import clean
from app.text.speakable import is_speakable

ALL = "".join(chr(cp) for cp in range(sys.maxunicode + 1))


def test_every_control_and_surrogate_becomes_a_space_except_tab_and_line_breaks() -> None:
    for char in ALL:
        category = unicodedata.category(char)
        if category in ("Cc", "Cs") and char not in "\t\n\r":
            assert strip_invisible(f"a{char}b") == "a b", ascii(char)
    assert strip_invisible("a\tb\nc\rd") == "a\tb\nc\rd"


def test_every_format_and_default_ignorable_character_is_removed() -> None:
    """Checked against Python's Unicode database (Cf) and the regex package's, which also knows the
    Default_Ignorable_Code_Point property (newer Unicode versions add characters to both)."""
    ignorable = regex.compile(r"[\p{Cf}\p{Default_Ignorable_Code_Point}]")
    for char in ALL:
        if unicodedata.category(char) == "Cf" or ignorable.match(char):
            assert strip_invisible(f"a{char}b") == "ab", ascii(char)


def test_visible_text_is_left_as_it_is() -> None:
    """Every character that is none of the above passes unchanged (letters, marks, spaces, emoji)."""
    ignorable = regex.compile(r"[\p{Cf}\p{Default_Ignorable_Code_Point}]")
    visible = "".join(
        char
        for char in ALL
        if unicodedata.category(char) not in ("Cc", "Cf", "Cs") and not ignorable.match(char)
    )
    assert strip_invisible(visible) == visible
    for text in ("Saya ok", "வணக்கம்", "你好。", "naïve café", "e\u0301", "\U0001f600 ok"):
        assert strip_invisible(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Good\x00morning\x1b, my\x7ffriend.", "Good morning, my friend."),
        (
            "zero\u200bwidth and\u00a0soft\u00adhyphen",
            "zerowidth and soft hyphen".replace(" hyphen", "hyphen"),
        ),
        ("\u202eabc\u202c def\u2066ghi\u2069", "abc defghi"),
        ("hidden\U000e0041\U000e0042 tags", "hidden tags"),
        ("**Bold\u200d** text\x85next", "Bold text next"),
        ("line one\x0bline two", "line one line two"),
    ],
)
def test_clean_reads_controls_as_spaces_and_drops_format_characters(text: str, expected: str) -> None:
    assert clean(text) == expected


@pytest.mark.parametrize(
    "text", ["\x00", "\u3164\u115f", "\u202e\u2066\u200f", "\x01\x9f", "\U000e0041", "\ufe0f"]
)
def test_input_of_only_invisible_characters_has_nothing_to_speak(text: str) -> None:
    assert not is_speakable(clean(text))
