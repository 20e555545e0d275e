"""Malay number words, written by hand.

``num2words`` reads Indonesian, whose number words Malay shares up to a million; it does not fit here:
importing it loads all of its languages (~90 ms), and three of its words are not Malaysian Malay
("nol" for zero, "miliar" for 10^9, "koma" for the decimal point). The tests check this module
against ``num2words(lang="id")`` with those three words mapped.

Conventions: zero is "kosong" (as read in IC, phone and account numbers, and by call centres);
se- for one of ten, a hundred and a thousand ("sepuluh", "seratus", "seribu") but "satu juta",
"satu bilion"; 11-19 "sebelas", "dua belas"...; decimals digit by digit after "perpuluhan";
negative numbers "negatif"; ordinals "pertama", then ke- ("kedua", "kedua puluh satu").
"""

from __future__ import annotations

__all__ = ["DIGITS", "cardinal", "decimal", "digits", "ordinal"]

DIGITS = ("kosong", "satu", "dua", "tiga", "empat", "lima", "enam", "tujuh", "lapan", "sembilan")
_SCALES = ((10**12, "trilion"), (10**9, "bilion"), (10**6, "juta"))


def _below_thousand(n: int) -> list[str]:
    words: list[str] = []
    if n >= 100:
        words += ["seratus"] if n < 200 else [DIGITS[n // 100], "ratus"]
        n %= 100
    if n >= 20:
        words += [DIGITS[n // 10], "puluh"]
        if n % 10:
            words.append(DIGITS[n % 10])
    elif n == 10:
        words.append("sepuluh")
    elif n == 11:
        words.append("sebelas")
    elif n > 11:
        words += [DIGITS[n - 10], "belas"]
    elif n:
        words.append(DIGITS[n])
    return words


def cardinal(n: int) -> str:
    """1250 -> "seribu dua ratus lima puluh"; 1_000_000 -> "satu juta"."""
    if n < 0:
        return "negatif " + cardinal(-n)
    if n == 0:
        return DIGITS[0]
    words: list[str] = []
    for value, name in _SCALES:
        if n >= value:
            count, n = divmod(n, value)
            words += [cardinal(count), name]
    if n >= 1000:
        count, n = divmod(n, 1000)
        words += ["seribu"] if count == 1 else [cardinal(count), "ribu"]
    words += _below_thousand(n)
    return " ".join(words)


def ordinal(n: int) -> str:
    """1 -> "pertama", 3 -> "ketiga", 21 -> "kedua puluh satu"."""
    return "pertama" if n == 1 else "ke" + cardinal(n)


def digits(text: str) -> str:
    """For example "0123" -> "kosong satu dua tiga" (ASCII digits only)."""
    return " ".join(DIGITS[ord(c) - 48] for c in text)


def decimal(text: str) -> str:
    """For example "3.14" -> "tiga perpuluhan satu empat"."""
    whole, _, fraction = text.replace(",", "").partition(".")
    spoken = cardinal(int(whole or "0"))
    return f"{spoken} perpuluhan {digits(fraction)}" if fraction else spoken
