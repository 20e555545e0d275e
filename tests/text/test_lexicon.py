"""Lexicon matching: whole words in every script, case rules, language scope, precedence, PLS."""

from __future__ import annotations

import pytest

from app.text.lexicon import LexiconError, LexiconLimits, Pronouncer, parse_entries, parse_pls


def pronouncer(*pairs: tuple[str, str], **options: object) -> Pronouncer:
    items = [{"grapheme": g, "alias": a, **options} for g, a in pairs]
    return Pronouncer([parse_entries(items)])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Call MyKad now", "Call my kad now"),
        ("MyKads and xMyKad stay", "MyKads and xMyKad stay"),  # whole words only
        ("mykad, MYKAD.", "my kad, my kad."),  # any case by default
        ("我的MyKad到了", "我的my kad到了"),  # no spaces between Chinese words
        ("உங்கள் MyKad எண்", "உங்கள் my kad எண்"),
        ("Tun  Dr Ismail and Dr Lee", "Tun Doktor Ismail and Doctor Lee"),  # longest first; spaces vary
        ("Jln. Ampang", "Jalan Ampang"),
    ],
)
def test_whole_words_longest_first(text: str, expected: str) -> None:
    made = pronouncer(
        ("MyKad", "my kad"), ("Tun Dr Ismail", "Tun Doktor Ismail"), ("Dr", "Doctor"), ("Jln.", "Jalan")
    )
    assert made.apply(text) == expected


def test_a_tamil_word_is_not_cut_inside_its_vowel_signs() -> None:
    made = pronouncer(("கா", "X"))
    assert made.apply("காலை கா") == "காலை X"


def test_case_sensitive_entries_and_language_scope() -> None:
    lexicon = parse_entries(
        [
            {"grapheme": "US", "alias": "U S", "case_sensitive": True},
            {"grapheme": "TTDI", "alias": "Taman Tun Dr Ismail", "language": "ms-MY"},
        ]
    )
    made = Pronouncer([lexicon])
    assert made.apply("us and US") == "us and U S"
    assert made.apply("Saya tinggal di TTDI") == "Saya tinggal di Taman Tun Dr Ismail"  # detected Malay
    assert made.apply("I live in TTDI") == "I live in TTDI"
    assert made.apply("I live in TTDI", "ms") == "I live in Taman Tun Dr Ismail"


def test_the_earlier_lexicon_wins_for_the_same_grapheme_and_a_replacement_is_not_searched_again() -> None:
    first = parse_entries([{"grapheme": "KL", "alias": "Kuala Lumpur"}])
    second = parse_entries([{"grapheme": "KL", "alias": "K L"}, {"grapheme": "Kuala", "alias": "no"}])
    assert Pronouncer([first, second]).apply("KL!") == "Kuala Lumpur!"
    assert Pronouncer([second, first]).apply("KL!") == "K L!"


def test_pls_with_aliases_namespaces_and_several_graphemes() -> None:
    lexicon = parse_pls(
        '<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" xml:lang="zh-CN">'
        "<lexeme><grapheme>KLCC</grapheme><grapheme>klcc</grapheme><alias>吉隆坡城中城</alias></lexeme>"
        "</lexicon>"
    )
    assert [(e.grapheme, e.alias, e.language) for e in lexicon.entries] == [
        ("KLCC", "吉隆坡城中城", "zh"), ("klcc", "吉隆坡城中城", "zh"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "document",
    [
        '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "b">]><lexicon>&a;</lexicon>',
        '<!DOCTYPE l SYSTEM "http://example.invalid/x.dtd"><lexicon/>',
        "<lexicon><lexeme><grapheme>a</grapheme></lexeme></lexicon>",
        "<speak/>",
        "<lexicon>",
    ],
)
def test_bad_pls_documents_are_refused(document: str) -> None:
    with pytest.raises(LexiconError):
        parse_pls(document)


def test_limits() -> None:
    limits = LexiconLimits(max_entries=2, max_grapheme_chars=5, max_alias_chars=5)
    with pytest.raises(LexiconError, match="at most 2 entries"):
        parse_entries([{"grapheme": "a", "alias": "b"}] * 3, limits=limits)
    with pytest.raises(LexiconError, match="at most 5"):
        parse_entries([{"grapheme": "abcdef", "alias": "b"}], limits=limits)
