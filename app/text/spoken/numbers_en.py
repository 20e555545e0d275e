"""English number words, written by hand.

``num2words`` (maintained) reads English too, but it does not fit here: importing it loads all of its
~50 languages (~90 ms, against the house rule that importing costs milliseconds), one English
cardinal costs ~50 µs (the whole per-sentence budget), and its style ("one thousand, two hundred and
fifty") is not the one we speak. The tests check this module against ``num2words`` instead.

Conventions: no "and", no commas, no hyphens ("one thousand two hundred fifty", "twenty one");
short scale (million, billion, trillion); decimals digit by digit after "point"; zero is "zero".
"""

from __future__ import annotations

__all__ = ["DIGITS", "cardinal", "decimal", "digits", "ordinal", "year"]

DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_TEENS = (
    "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen",
)  # fmt: skip
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))
_ORDINAL_WORDS = {
    "one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
    "nine": "ninth", "twelve": "twelfth",
}  # fmt: skip


def _below_thousand(n: int) -> list[str]:
    words: list[str] = []
    if n >= 100:
        words += [DIGITS[n // 100], "hundred"]
        n %= 100
    if n >= 20:
        words.append(_TENS[n // 10])
        if n % 10:
            words.append(DIGITS[n % 10])
    elif n >= 10:
        words.append(_TEENS[n - 10])
    elif n:
        words.append(DIGITS[n])
    return words


def cardinal(n: int) -> str:
    """1250 -> "one thousand two hundred fifty"; negative numbers get "minus"."""
    if n < 0:
        return "minus " + cardinal(-n)
    if n < 10:
        return DIGITS[n]
    words: list[str] = []
    for value, name in _SCALES:
        if n >= value:
            count, n = divmod(n, value)
            words += [cardinal(count), name]
    words += _below_thousand(n)
    return " ".join(words)


def ordinal(n: int) -> str:
    """21 -> "twenty first", 100 -> "one hundredth"."""
    words = cardinal(n).split(" ")
    last = words[-1]
    if last in _ORDINAL_WORDS:
        words[-1] = _ORDINAL_WORDS[last]
    elif last.endswith("y"):
        words[-1] = last[:-1] + "ieth"
    else:
        words[-1] = last + "th"
    return " ".join(words)


def digits(text: str) -> str:
    """For example "0123" -> "zero one two three" (ASCII digits only)."""
    return " ".join(DIGITS[ord(c) - 48] for c in text)


def decimal(text: str) -> str:
    """For example "3.14" -> "three point one four"; "1,250" -> "one thousand two hundred fifty"."""
    whole, _, fraction = text.replace(",", "").partition(".")
    spoken = cardinal(int(whole or "0"))
    return f"{spoken} point {digits(fraction)}" if fraction else spoken


def year(n: int) -> str:
    """2026 -> "twenty twenty six", 2005 -> "two thousand five", 1905 -> "nineteen oh five"."""
    if not 1000 <= n <= 9999 or 2000 <= n <= 2009 or n % 1000 == 0:
        return cardinal(n)
    high, low = divmod(n, 100)
    if low == 0:
        return f"{cardinal(high)} hundred"
    if low < 10:
        return f"{cardinal(high)} oh {DIGITS[low]}"
    return f"{cardinal(high)} {cardinal(low)}"
