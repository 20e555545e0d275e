"""The contract of ``normalize_spoken`` over our corpus and random input: no digit left, plain text
unchanged, idempotent, and the agreement targets held."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from app.text.spoken import normalize_spoken
from app.text.spoken.patterns import ABBREVIATION_HINT, HINT_WORDS, prefix_tree
from bench.normalizer_corpus import CORPUS, LANGUAGES

TARGETS = {"en": 0.95, "ms": 0.95, "zh": 0.95, "ta": 0.90, "cs": 0.90}  # the agreement targets


def has_digit(text: str) -> bool:
    return any(unicodedata.category(c) in ("Nd", "No") for c in text)


def test_corpus_is_large_and_covers_every_language() -> None:
    assert len(CORPUS) >= 400
    for language in LANGUAGES:
        assert sum(case.language == language for case in CORPUS) >= 60, language
    for case in CORPUS:
        assert not has_digit(case.expected), case.text


def test_no_digit_is_left_in_the_corpus() -> None:
    for case in CORPUS:
        assert not has_digit(normalize_spoken(case.text)), case.text


def test_plain_sentences_come_back_byte_identical() -> None:
    plain = [case for case in CORPUS if "plain" in case.entities]
    assert len(plain) >= 20
    for case in plain:
        assert normalize_spoken(case.text) == case.text


def test_normalizing_twice_changes_nothing() -> None:
    for case in CORPUS:
        once = normalize_spoken(case.text)
        assert normalize_spoken(once) == once, case.text


@pytest.mark.parametrize("language", LANGUAGES)
def test_agreement_with_the_corpus_meets_the_target(language: str) -> None:
    cases = [case for case in CORPUS if case.language == language]
    agreeing = sum(normalize_spoken(case.text) == case.expected for case in cases)
    assert agreeing / len(cases) >= TARGETS[language]


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        (
            "Your total is RM1,250.50 and the meeting is at 3pm on 12/9/2026.",
            "Your total is one thousand two hundred fifty ringgit fifty sen and the meeting is at three p m "
            "on the twelfth of September twenty twenty six.",
        ),
        (
            "baki saya tinggal RM1,250.50 dan IC saya 960314875079",
            "baki saya tinggal seribu dua ratus lima puluh ringgit lima puluh sen dan IC saya sembilan enam "
            "kosong tiga satu empat lapan tujuh lima kosong tujuh sembilan",
        ),
        ("价格是RM500", "价格是五百令吉"),
    ],
)
def test_seed_examples(text: str, spoken: str) -> None:
    assert normalize_spoken(text) == spoken


def test_other_digits_are_read_too() -> None:
    assert normalize_spoken("Pay １２３ now") == "Pay one hundred twenty three now"
    assert normalize_spoken("எண் ௧௨") == "எண் பன்னிரண்டு"
    assert normalize_spoken("Step ② of ٣") == "Step two of three"
    assert normalize_spoken("10 m²") == "ten square metres"
    # a thousands separator in a dotted number (it raised ValueError)
    assert (
        normalize_spoken("Total 1,234.3.5 units")
        == "Total one thousand two hundred thirty four point three point five units"
    )


_PIECES = [
    "RM", "$", "USD ", "€", "No. ", "#", "ke-", "Dr. ", "Sdn Bhd", "e.g.", "etc.", "@", ".", ",", "-", "/",
    ":", "%", "°C", "km", "kg", "x", "k", "pm", "p.m.", " ", " ", "pukul ", "at ", "on ", "价格", "点", "年",
    "第", "个", "உங்கள் ", "ஆம்", "க்கு", "www.", ".com", ".my", "http://", "abc", "MH", "Q", "Jan", "Mei",
    "½", "²", "①", "１２", "0", "+60", "(", "，", "。", "saya ", "the ", "dan ", "IC ", "OTP ",
    "pg", "ptg", " mlm", "tgh", "petang", "~", "*", "#", "'", '"', "GMT+", "Mon-", "Fri", "°", "T", "Z",
    " to ", " and ", "₹", "¥", "Rs.", "HK$", "மணி", "-ல்", "கி.மீ", " 1/", "ft", "tsp", "/day",
    "+", " + ", "=", " = ", "×", "÷", "−", "-RM ", "¾", " ½ kg", " hrs", "p", "K TV", "s", " mths", "ms",
    "call ", "at ", "~", "～", "ரூ.", "ரூ ", "lbs", "mph", "-0", "版本号", "press ", " # ", " * ", "*#",
    "M", "bn", "h ", "m", " ft ", " in", " x ", "11.11", " sale", "score ", "购物节",
    " ringgit", "元", "块", " dollars", "about ~", "y/y", " YoY", "A+", "B-", "O", "AB", "blood ", "血型",
    "B-3-", "rd-", "th", "scale ", "/-", " @ ", "w/ ", "j", " x Teh", "exp ", "won ", "比分", "FY", " mi",
    "top-", "Q1-Q", "M+", "k+", " kcal", "IP ", "192.168.", "text ", " to ", " & ", "R&D",
    "wait ", "s ", " s", "'", "every ", " x", "©", "Copyright ", "St. ", " St.", " Rd.", "Bkt ", "Jan-Mar ",
    "Mac-", "Sept ", "lagu ", "等待", "Tue ", "周二", "Room ", "室", "J", " Juta", "min. ", " max ", "maks ",
    "1234-", "-5678-", "账号", "++", " pct", "转", " + RM", " = $", "Error ",
]  # fmt: skip


def test_random_input_never_fails_and_keeps_the_contract() -> None:
    rng = random.Random(4)
    for _ in range(3000):
        parts = []
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.45:
                parts.append(
                    str(rng.choice([rng.randint(0, 99), rng.randint(0, 9999), rng.randint(0, 10**13)]))
                )
            else:
                parts.append(rng.choice(_PIECES))
        text = "".join(parts)
        once = normalize_spoken(text)
        assert not has_digit(once), text
        assert normalize_spoken(once) == once, text


def test_the_factored_hint_pattern_matches_what_its_words_match() -> None:
    words = ["Sdn", "Sek", "Sg", "S", "min.", "min ", "Mr", "Mrs", "p.a."]
    tree = re.compile(prefix_tree(words))
    assert all(tree.fullmatch(word) for word in words)
    assert not any(tree.fullmatch(other) for other in ("Sd", "min", "M", "Sx", "pXa.", "Mrss", ""))
    flat = re.compile("|".join(re.escape(w) for w in sorted(set(HINT_WORDS), key=len, reverse=True)))
    rng = random.Random(9)
    for _ in range(2000):
        text = " ".join(rng.choice([*HINT_WORDS, *_PIECES]) for _ in range(8))
        found = {m.start() for m in ABBREVIATION_HINT.finditer(text)}
        assert found == {m.start() for m in flat.finditer(text)}, text


def test_a_long_chain_of_years_is_read() -> None:
    """A year after "to" looks back at the year before it, a few years at most: a long chain neither
    recurses without bound nor rereads the chain for every year."""
    text = "in " + " to ".join(str(1000 + i % 1000) for i in range(3000))
    spoken = normalize_spoken(text)
    assert not has_digit(spoken)
    assert spoken.startswith("in one thousand to ten oh one to ten oh two")


def test_a_long_chain_of_date_ranges_is_read() -> None:
    """A date after a dash is read on its own: a chain of dashes and dates pairs them, without recursion."""
    spoken = normalize_spoken(" - ".join(f"{1 + i % 28}/1/2025" for i in range(2000)), "en")
    assert not has_digit(spoken)
    assert spoken.startswith(
        "the first of January twenty twenty five to the second of January twenty twenty five - the third"
    )


def test_import_has_no_side_effects_and_pulls_in_no_library() -> None:
    code = "import sys, app.text.spoken; print(sorted(m for m in ('num2words', 'cn2an') if m in sys.modules))"
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert result.stdout.strip() == "[]"
