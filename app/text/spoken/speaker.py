"""``Speaker``: how one language says numbers, money, units, times, dates and fractions.

The entity handlers (``entities.py``) parse what was written; a speaker only phrases parsed values.
The base class holds the phrasing that English, Malay and Tamil share (words separated by spaces,
templates with ``{n}`` for the number); each language module overrides what differs.
"""

from __future__ import annotations

from decimal import Decimal
from types import ModuleType
from typing import ClassVar

__all__ = ["SCALE_VALUES", "SIGNS", "Speaker"]

SCALE_VALUES = {
    "k": 1000, "m": 10**6, "b": 10**9, "t": 10**12, "lk": 10**5, "cr": 10**7,  # lakh, crore
    "wan": 10**4, "qw": 10**7, "yi": 10**8,  # Mandarin 万, 千万, 亿
}  # fmt: skip
_LONGEST = 15  # digits of the longest whole number read as a quantity
SIGNS = frozenset("-\u2212+")  # the minus sign U+2212 is read like a hyphen-minus


class Speaker:
    """Phrasing for one language. Values arrive as written digits ("1,250.50"), already validated."""

    code = ""
    numbers: ModuleType
    minus_word = ""
    to_word = ""  # range connector: "three to five"
    ratio_word = ""  # "16:9" -> "sixteen to nine"
    out_of_template = "{a} {b}"  # "4.5/5" -> "four point five out of five"
    or_more_template = "{n}"  # "18+" -> "eighteen plus"
    feet_inches_template = "{ft} {inch}"  # 6'2" -> "six foot two"
    hour_word = ""  # written after a clock time, it says the hour itself (Tamil "9:30 மணிக்கு")
    percent_template = "{n}"
    point_word = ""  # between the parts of a dotted number that is not a decimal (17.4.1)
    address_dot_word = ""  # between the parts of an IP address (192.168.1.1)
    plus_word = ""
    grade_signs = ("", "")  # "A+", "B-": a letter grade's plus and minus
    blood_signs = ("", "")  # "O+", "AB-": a blood group's Rh positive and negative
    number_template = "{n}"  # "#12" -> "number twelve"
    times_template = "{n}"  # "2x" -> "two times"
    by_word = ""  # dimensions: "30 x 20" -> "thirty by twenty"
    version_word = ""  # "v4.3" -> "version four point three"
    slash_word = ""  # a road number: "Jalan 7/2" -> "Jalan seven slash two"
    scale_words: ClassVar[dict[str, str]] = {}  # "m" -> "million": scales said as words, not multiplied out
    units: ClassVar[dict[str, tuple[str, str]]] = {}  # key -> (template for 1, template for other values)
    per_units: ClassVar[dict[str, str]] = {}  # key -> "{n} per kilogram"
    weekdays: tuple[str, ...] = ()  # Monday first
    months: tuple[str, ...] = ()  # January first
    star_word = ""  # "*123#": the keys of a phone service code
    hash_word = ""
    approx_word = ""  # "~8" -> "about eight"
    at_word = ""  # "@ 5pm", "12 @ RM2.50": "at" (none: the sign stays)
    and_word = ""  # "salt & pepper": "and" (none: the sign stays)
    copyright_word = "©"  # "© 2025": "copyright" (none: the sign stays)
    word_space = " "  # between two words ("" in Mandarin)
    comparison_words: ClassVar[dict[str, str]] = {}  # "≥" -> "at least", before a number
    arithmetic_words: ClassVar[dict[str, str]] = {}  # "+", "-", "×", "÷", "=" between numbers: "1+1=2"
    # key -> (major unit for 1, for other amounts, minor unit for 1, for other amounts)
    currencies: ClassVar[dict[str, tuple[str, str, str, str]]] = {}

    def cardinal(self, n: int) -> str:
        return self.numbers.cardinal(n) if abs(n) < 10**_LONGEST else self.digits(str(abs(n)))

    def ordinal(self, n: int) -> str:
        return self.numbers.ordinal(n)

    def digits(self, text: str) -> str:
        return self.numbers.digits(text)

    def whole(self, written: str) -> str:
        """A written whole number read as one ("12" -> twelve), or digit by digit when it has a leading zero
        ("05" -> zero five): the parts of versions, road numbers and unit numbers."""
        return self.digits(written) if written[0] == "0" and len(written) > 1 else self.cardinal(int(written))

    def number(self, text: str) -> str:
        """A written quantity such as "1,250", "-3.5", "+15" or "0.75", in words."""
        if text[:1] in SIGNS:
            return self.join([self.sign_word(text[0]), self.number(text[1:])])
        whole, _, fraction = text.replace(",", "").partition(".")
        if len(whole) > _LONGEST:  # no one says such a number: digit by digit
            return self.join([self.digits(whole), self.point_word if fraction else "", self.digits(fraction)])
        return self.numbers.decimal(text)

    def sign_word(self, sign: str) -> str:
        """The word for a written sign: "-" (or the minus sign "−") and "+"."""
        return self.plus_word if sign == "+" else self.minus_word

    def year(self, n: int) -> str:
        return self.cardinal(n)

    def version(self, parts: list[str]) -> str:
        """ "v1.12.7" -> "version one point twelve point seven" (each part a whole number)."""
        return self.join([self.version_word, self.dotted(parts)])

    def day_of_month(self, day: int, month: int | None, year: int | None) -> str:
        """Malay "3hb Ogos" (hari bulan) outside Malay: a date, or the day alone when no month is written."""
        return self.date(day, month, year) if month else self.cardinal(day)

    def dotted(self, parts: list[str]) -> str:
        """A version or other number with several dots: "17.4.1" (a thousands separator in the first part
        is dropped: "1,234.3.5")."""
        return self._between([self.whole(part.replace(",", "")) for part in parts], self.point_word)

    def address(self, parts: list[str]) -> str:
        """An IP address, each part digit by digit: "192.168.1.1" -> "one nine two dot one six eight ..."."""
        return self._between([self.digits(part) for part in parts], self.address_dot_word)

    def _between(self, spoken: list[str], word: str) -> str:
        """``spoken`` joined with ``word`` between each two."""
        pieces = spoken[:1]
        for item in spoken[1:]:
            pieces += (word, item)
        return self.join(pieces)

    def join(self, parts: list[str]) -> str:
        return " ".join(p for p in parts if p)

    def range(self, low: str, high: str) -> str:
        return self.join([low, self.to_word, high])

    def ratio(self, *parts: str) -> str:
        """A ratio or score written with colons, its numbers as written: "16:9", "3:2", "1:1.5", "1:3:5"."""
        words = [self.number(parts[0])]
        for part in parts[1:]:
            words += [self.ratio_word, self.number(part)]
        return self.join(words)

    def duration(self, minutes: int, seconds: int) -> str:
        """Minutes and seconds written like a clock that is no clock time: "25:30"."""
        spoken = [self.unit(self.count(minutes), str(minutes), "min")]
        if seconds:
            spoken.append(self.unit(self.count(seconds), str(seconds), "sec"))
        return self.join(spoken)

    def out_of(self, score: str, top: str) -> str:
        """A score over its maximum, both already read: "4.5/5"."""
        return self.out_of_template.format(a=score, b=top)

    def shopping_day(self, n: int) -> str:
        """A sale day named by its date, "11.11": the number twice."""
        return self.join([self.cardinal(n), self.cardinal(n)])

    def or_more(self, spoken: str) -> str:
        """A number and more, already read: "18+"."""
        return self.or_more_template.format(n=spoken)

    def feet_inches(self, feet: int, inches: int) -> str:
        """A height in feet and inches: 6'2"."""
        return self.feet_inches_template.format(ft=self.cardinal(feet), inch=self.cardinal(inches))

    def mixed(self, whole: int, numerator: int, denominator: int) -> str:
        """A whole number and a fraction: "2 1/2"."""
        return self.join([self.cardinal(whole), self.fraction(numerator, denominator)])

    def percent(self, spoken: str) -> str:
        return self.percent_template.format(n=spoken)

    def is_one(self, value: str) -> bool:
        return value == "1"

    def unit(self, spoken: str, value: str, unit: str) -> str:
        """``spoken`` is the value already read, ``value`` the last written value (for the plural)."""
        one, many = self.units[unit]
        return (one if self.is_one(value) else many).format(n=spoken)

    def per(self, spoken: str, per: str) -> str:
        return self.per_units[per].format(n=spoken)

    def scaled(self, amount: str, scale: str) -> tuple[str, str]:
        """(spoken, written value) of an amount with a scale ("2.5", "m"): a scale word or multiplied out."""
        if scale in self.scale_words:
            return self.join([self.quantity(amount.replace(",", "")), self.scale_words[scale]]), amount
        value = Decimal(amount.replace(",", "")) * SCALE_VALUES[scale]
        text = format(value.normalize(), "f") if value != value.to_integral() else str(int(value))
        return self.number(text), text

    def money(self, amount: str, currency: str, scale: str | None = None) -> str:
        """Money: "1,250.50" + "rm" is ringgit and sen; with a scale ("2.5", "m") the amount is one number."""
        major1, major_n, minor1, minor_n = self.currencies[currency]
        if scale:
            spoken, value = self.scaled(amount, scale)
            return self.join([spoken, major1 if self.is_one(value) else major_n])
        whole, _, fraction = amount.replace(",", "").partition(".")
        if len(fraction) > 2 or (fraction and not minor1):
            return self.join([self.number(amount), major_n])
        units, cents = int(whole or "0"), int(fraction.ljust(2, "0") or "0")
        major = self.join([self.count(units), major1 if units == 1 else major_n])
        if not cents:
            return major
        minor = self.join([self.count(cents), minor1 if cents == 1 else minor_n])
        return minor if units == 0 else self.join([major, minor])

    def count(self, n: int) -> str:
        """A whole number before a currency, unit or measure word (Mandarin says 两, not 二)."""
        return self.cardinal(n)

    def quantity(self, text: str) -> str:
        """A written quantity before a unit or measure word: ``number``, or ``count`` when whole."""
        return self.count(int(text)) if text.isdigit() else self.number(text)

    def time(self, hour: int, minute: int, period: str | None) -> str:
        """``period`` is "am", "pm" or None (no marker: "9:30")."""
        raise NotImplementedError

    def time_before_hour_word(self, hour: int, minute: int, period: str | None) -> str:
        """A clock time that the text follows with ``hour_word``: the time without its own hour word."""
        return self.time(hour, minute, period)

    def date(self, day: int, month: int, year: int | None) -> str:
        raise NotImplementedError

    def month_first_date(self, day: int, month: int, year: int | None) -> str:
        """A date written month first ("September 12, 2026"); only English keeps that order."""
        return self.date(day, month, year)

    def fraction(self, numerator: int, denominator: int) -> str:
        raise NotImplementedError
