"""Number words of the spoken normalizer, per language, checked against maintained libraries where one exists.

``num2words`` (English, Indonesian) and ``cn2an`` (Chinese) do not fit the runtime (import cost, speed,
style: see the module docstrings), so they serve here as oracles; the tests skip where they are not
installed.
"""

from __future__ import annotations

import random
import re

import pytest

from app.text.spoken import numbers_en, numbers_ms, numbers_ta, numbers_zh


def _sample() -> list[int]:
    rng = random.Random(7)
    return [*range(0, 1200), *(rng.randrange(10**k) for k in range(4, 13) for _ in range(60))]


def test_english_cardinals_agree_with_num2words() -> None:
    num2words = pytest.importorskip("num2words").num2words
    for n in _sample():
        expected = re.sub(r" and\b", "", num2words(n, lang="en")).replace(",", "").replace("-", " ")
        assert numbers_en.cardinal(n) == expected, n


def test_english_ordinals_agree_with_num2words() -> None:
    num2words = pytest.importorskip("num2words").num2words
    for n in range(1, 1200):
        expected = (
            re.sub(r" and\b", "", num2words(n, lang="en", to="ordinal")).replace(",", "").replace("-", " ")
        )
        assert numbers_en.ordinal(n) == expected, n


def test_malay_cardinals_agree_with_num2words_indonesian() -> None:
    num2words = pytest.importorskip("num2words").num2words
    malay = {"nol": "kosong", "delapan": "lapan", "miliar": "bilion", "triliun": "trilion"}
    for n in _sample():
        expected = " ".join(malay.get(w, w) for w in num2words(n, lang="id").split())
        expected = expected.replace("juta satu ribu", "juta seribu")  # num2words' only odd one: 1,001,000
        assert numbers_ms.cardinal(n) == expected, n


def test_mandarin_cardinals_agree_with_cn2an() -> None:
    cn2an = pytest.importorskip("cn2an")
    for n in _sample():
        assert numbers_zh.cardinal(n).replace("两", "二") == cn2an.an2cn(n), n


@pytest.mark.parametrize(
    ("n", "spoken"),
    [
        (0, "zero"),
        (12, "twelve"),
        (21, "twenty one"),
        (1250, "one thousand two hundred fifty"),
        (1_000_000, "one million"),
        (-5, "minus five"),
    ],
)
def test_english_cardinal(n: int, spoken: str) -> None:
    assert numbers_en.cardinal(n) == spoken


@pytest.mark.parametrize(
    ("n", "spoken"),
    [
        (2026, "twenty twenty six"),
        (2005, "two thousand five"),
        (2000, "two thousand"),
        (1998, "nineteen ninety eight"),
        (1905, "nineteen oh five"),
        (1900, "nineteen hundred"),
        (2010, "twenty ten"),
    ],
)
def test_english_year(n: int, spoken: str) -> None:
    assert numbers_en.year(n) == spoken


@pytest.mark.parametrize(
    ("n", "spoken"),
    [
        (0, "kosong"),
        (10, "sepuluh"),
        (11, "sebelas"),
        (12, "dua belas"),
        (20, "dua puluh"),
        (100, "seratus"),
        (1000, "seribu"),
        (1250, "seribu dua ratus lima puluh"),
        (21_000, "dua puluh satu ribu"),
        (1_000_000, "satu juta"),
        (2_000_000_000, "dua bilion"),
    ],
)
def test_malay_cardinal(n: int, spoken: str) -> None:
    assert numbers_ms.cardinal(n) == spoken


def test_malay_ordinals_and_decimals() -> None:
    assert [numbers_ms.ordinal(n) for n in (1, 2, 3, 12, 21)] == [
        "pertama",
        "kedua",
        "ketiga",
        "kedua belas",
        "kedua puluh satu",
    ]
    assert numbers_ms.decimal("3.14") == "tiga perpuluhan satu empat"


@pytest.mark.parametrize(
    ("n", "spoken"),
    [
        (10, "十"),
        (12, "十二"),
        (20, "二十"),
        (110, "一百一十"),
        (200, "两百"),
        (1005, "一千零五"),
        (1250, "一千二百五十"),
        (2000, "两千"),
        (10005, "一万零五"),
        (100_000, "十万"),
        (2_500_000, "两百五十万"),
        (100_000_000, "一亿"),
    ],
)
def test_mandarin_cardinal(n: int, spoken: str) -> None:
    assert numbers_zh.cardinal(n) == spoken


def test_mandarin_decimals_digits_and_huge_numbers() -> None:
    assert numbers_zh.decimal("0.75") == "零点七五"
    assert numbers_zh.digits("2026") == "二零二六"
    assert numbers_zh.cardinal(10**17) == "一" + "零" * 17


@pytest.mark.parametrize(
    ("n", "spoken"),
    [
        (0, "பூஜ்ஜியம்"),
        (11, "பதினொன்று"),
        (19, "பத்தொன்பது"),
        (21, "இருபத்தொன்று"),
        (100, "நூறு"),
        (101, "நூற்று ஒன்று"),
        (300, "முந்நூறு"),
        (900, "தொள்ளாயிரம்"),
        (1000, "ஆயிரம்"),
        (1250, "ஆயிரத்து இருநூற்று ஐம்பது"),
        (2026, "இரண்டாயிரத்து இருபத்தாறு"),
        (3000, "மூவாயிரம்"),
        (5000, "ஐயாயிரம்"),
        (11_000, "பதினோராயிரம்"),
        (21_000, "இருபத்தோராயிரம்"),
        (100_000, "ஒரு லட்சம்"),
        (150_000, "ஒரு லட்சத்து ஐம்பதாயிரம்"),
        (1_000_000, "பத்து லட்சம்"),
        (12_000_000, "ஒரு கோடியே இருபது லட்சம்"),
    ],
)
def test_tamil_cardinal(n: int, spoken: str) -> None:
    assert numbers_ta.cardinal(n) == spoken


def test_tamil_ordinals_and_suffixes() -> None:
    assert [numbers_ta.ordinal(n) for n in (1, 2, 3, 21)] == ["முதலாம்", "இரண்டாம்", "மூன்றாம்", "இருபத்தொன்றாம்"]
    assert numbers_ta.ordinal(5, "ஆவது") == "ஐந்தாவது"
    assert numbers_ta.join_suffix("ஐந்து", "க்கு") == "ஐந்துக்கு"
    assert numbers_ta.join_suffix("இருபது", "இல்") == "இருபதில்"
    assert numbers_ta.join_suffix("ஆயிரம்", "க்கு") == "ஆயிரத்துக்கு"
    assert numbers_ta.join_suffix("ரிங்கிட்", "க்கு") == "ரிங்கிட்டுக்கு"
    assert numbers_ta.join_suffix("டாலர்", "ஐ") == "டாலரை"


def test_every_module_reads_every_digit_string() -> None:
    for module in (numbers_en, numbers_ms, numbers_zh, numbers_ta):
        spoken = module.digits("0123456789")
        assert not re.search(r"\d", spoken)
        assert len(set(spoken.split() if " " in spoken else spoken)) == 10
