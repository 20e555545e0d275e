"""sanitize: Markdown and HTML to speakable text, never merging words or dropping punctuation."""

from __future__ import annotations

import pytest

from app.text import sanitize as sanitize_module
from app.text.sanitize import sanitize


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("**Harga** rumah RM500,000.", "Harga rumah RM500,000."),
        (
            "Some *italic*, __bold__, ***both*** and ~~struck~~ text!",
            "Some italic, bold, both and struck text!",
        ),
        ("Run `pip install x` now.", "Run pip install x now."),
        ("Intro:\n\n```python\nprint(1)\n```\n\nDone.", "Intro: Done."),
        ("See [the docs](https://example.com/docs).", "See the docs."),
        ("![A red car](car.png) is parked.", "A red car is parked."),
        (
            "Mail <ali@example.com> or visit <https://example.com>.",
            "Mail ali@example.com or visit https://example.com.",
        ),
        ("# Welcome\nThanks for calling.", "Welcome. Thanks for calling."),
        ("Title\n=====\nBody text", "Title. Body text"),
        ("One.\n\n---\n\nTwo.", "One. Two."),
        ("> Quoted line\n> continues here.", "Quoted line continues here."),
        ("You need:\n- a passport\n- a photo\n* a form", "You need: a passport. a photo. a form"),
        ("Steps:\n1. Open the app\n2. Tap pay", "Steps: Open the app. Tap pay"),
        ("2024. Tahun yang baik.", "2024. Tahun yang baik."),
        ("| Item | Price |\n|---|---|\n| Tea | RM5 |", "Item, Price. Tea, RM5"),
        ("Hello<br>world", "Hello world"),
        ("Hello <b>wo</b>rld and <i>you</i>!", "Hello world and you!"),
        ("<p>First</p><p>Second</p>", "First Second"),
        ("<div>Tom &amp; Jerry&nbsp;&lt;3</div>", "Tom & Jerry <3"),
        ("Fish &amp; chips &copy; 2024", "Fish & chips © 2024"),
        ("Hi <!-- hidden --> there <script>alert(1)</script>friend", "Hi there friend"),
        ("<div><style>p {color: red}</style>Shown</div>", "Shown"),
        ("line one\nline two\r\nline three", "line one line two line three"),
        ("Hi John\n\nThanks for calling", "Hi John. Thanks for calling"),
        ("  spaced    out\t text  ", "spaced out text"),
        ("soft\u00adhyphen and zero\u200bwidth", "softhyphen and zerowidth"),
        ("# 标题\n内容很好", "标题。内容很好"),
        ("snake_case_name and 5 * 3 * 2 and AT&T", "snake_case_name and 5 * 3 * 2 and AT&T"),
        ("x < 5 and y > 2", "x < 5 and y > 2"),
        ("Call +60 12-345 6789 or 1-300-88-1234.", "Call +60 12-345 6789 or 1-300-88-1234."),
        ("", ""),
    ],
)
def test_sanitize(source: str, expected: str) -> None:
    assert sanitize(source) == expected


@pytest.mark.parametrize(
    "plain",
    [
        "Hello there, how can I help you today?",
        "Baki saya RM1,250.50 dan IC saya 960314875079.\nTerima kasih!",
        "Wait... what?! No way.\n\nOkay then",
        "您好，请问有什么可以帮您？",
        "வணக்கம், எப்படி இருக்கிறீர்கள்?",
    ],
)
def test_plain_text_fast_path_matches_the_parser(plain: str) -> None:
    parsed = sanitize_module._join_blocks(sanitize_module._markdown_blocks(plain))
    assert sanitize(plain) == parsed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("end of line\nstart of next", "end of line start of next"),
        ("<td>cell</td><td>other</td>", "cell other"),
        ("a<br/>b<hr>c", "a b c"),
        ("<li>one</li><li>two</li>", "one two"),
        ("**bold** *it*", "bold it"),
    ],
)
def test_never_merges_words(text: str, expected: str) -> None:
    assert sanitize(text) == expected


def test_keeps_sentence_punctuation() -> None:
    text = "**Really?** Yes! *Great*. Wait... [Go](x); fine: ok, done."
    assert sanitize(text) == "Really? Yes! Great. Wait... Go; fine: ok, done."


def test_idempotent() -> None:
    text = "# Hi\n\n- **one** item\n- two\n\n<p>Tom &amp; Jerry</p>"
    once = sanitize(text)
    assert sanitize(once) == once
