"""The stream splitter: pieces that depend on the text alone (any delivery gives the same pieces), cut
where a normalizer reads nothing across the cut."""

from __future__ import annotations

import random

import pytest

from app.text.stream_split import Piece, StreamSplitter

TEXTS = [
    "Hello there, my friend! How are you today? It costs $3.50 or 1,000 units. Dr. Smith went to "
    "St. Louis on Jan 5, 2024 - really.",
    "你好，世界。今天天气很好！我们去公园吧",
    "A very long run of plain words without any punctuation at all that keeps going on and on",
    "Selamat pagi, apa khabar? Saya okay.\n\nNew paragraph: 10 km, then 3.5 kg.",
    'Count 1, 2, 3 now, please. The U.S. team won 3-1. "Quoted." (Bracketed!) Done…',
    "Open 9am - 5pm daily - closed on Sunday, prices RM5 - RM10 - cash only, 10 - twenty.",
    "Mix 2 + 2 = 4, 7 − 10 = −3, then 1½ kg at 0930 hrs. Balance -RM 25.40; call 555-1234 in 1080p.",
]


def pieces(text: str, sizes: list[int]) -> list[Piece]:
    splitter, out, at, i = StreamSplitter(), [], 0, 0
    while at < len(text):
        out += splitter.push(text[at : at + sizes[i % len(sizes)]])
        at, i = at + sizes[i % len(sizes)], i + 1
    return out + splitter.end()


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_any_delivery_gives_the_same_pieces(text: str) -> None:
    whole = pieces(text, [len(text)])
    rng = random.Random(1)
    for sizes in [[1], [3], [17], *([rng.randint(1, 9) for _ in range(7)] for _ in range(30))]:
        assert pieces(text, sizes) == whole, sizes
    assert " ".join(p.text for p in whole).replace(" ", "") == text.replace(" ", "").replace("\n", "")


def test_numbers_dates_and_abbreviations_stay_whole() -> None:
    texts = [p.text for p in pieces(TEXTS[0], [2])]
    assert "It costs $3.50 or 1,000 units." in texts
    assert not any(t.endswith("Dr.") or t.endswith("St.") for t in texts)
    assert any("Jan 5, 2024" in t for t in texts)
    assert [p.text for p in pieces("Count 1, 2, 3 now, please.", [1])] == ["Count 1, 2, 3 now,", "please."]
    assert [p.text for p in pieces("Call 03-1234 5678 ext. 56 or tel. 5 now. Done.", [1])] == [
        "Call 03-1234 5678 ext. 56 or tel. 5 now.",
        "Done.",
    ]


def test_a_spaced_dash_between_numbers_is_a_range_not_a_cut() -> None:
    texts = [p.text for p in pieces(TEXTS[5], [1])]
    assert texts == [
        "Open 9am - 5pm daily -",
        "closed on Sunday,",
        "prices RM5 - RM10 -",
        "cash only,",
        "10 - twenty.",  # the text ended before the word after the dash was certain: one piece
    ]


def test_kinds_and_spacing() -> None:
    got = pieces("Hi there, friend. 你好，世界。", [4])
    assert [(p.text, p.kind) for p in got] == [
        ("Hi there,", "clause"),
        ("friend.", "sentence"),
        ("你好，", "clause"),
        ("世界。", "end"),
    ]
    assert [p.spaced for p in got] == [True, True, True, False]


def test_a_cut_waits_for_what_decides_it() -> None:
    splitter = StreamSplitter()
    assert splitter.push("It is 3.") == []  # 3.5 may follow
    assert splitter.push("5 now") == []
    assert splitter.push(". And ") == [Piece("It is 3.5 now.", "sentence", True)]
    long = StreamSplitter(word_chars=12)
    assert long.push("plain words keep coming") == []  # "coming" may go on
    assert long.push(" ") == [Piece("plain words keep", "word", True)]
    assert long.end() == [Piece("coming", "end", True)]


def test_a_run_without_any_boundary_is_cut_at_max_chars() -> None:
    splitter = StreamSplitter(max_chars=50)
    got = splitter.push("x" * 120) + splitter.end()
    assert "".join(p.text for p in got) == "x" * 120 and max(len(p.text) for p in got) <= 50
