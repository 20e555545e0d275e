"""English phrasing: "one thousand two hundred fifty ringgit fifty sen", "three p m",
"the twelfth of September twenty twenty six". British unit spellings (kilometre, litre), as written in
Malaysia; units and currencies take the plural for every value but exactly 1.
"""

from __future__ import annotations

from typing import ClassVar

from app.text.spoken import numbers_en
from app.text.spoken.speaker import Speaker

__all__ = ["English"]

_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
    "November", "December",
)  # fmt: skip
_FRACTIONS = {2: ("half", "halves"), 4: ("quarter", "quarters")}


def _plural(one: str, many: str | None = None) -> tuple[str, str]:
    return "{n} " + one, "{n} " + (many or one + "s")


class English(Speaker):
    code = "en"
    numbers = numbers_en
    minus_word = "minus"
    to_word = "to"
    star_word = "star"
    hash_word = "hash"
    approx_word = "about"
    and_word = "and"
    copyright_word = "copyright"
    at_word = "at"
    comparison_words: ClassVar[dict[str, str]] = {
        "≥": "at least",
        "≤": "at most",
        "<": "less than",
        ">": "more than",
        "±": "plus or minus",
        "≈": "about",
    }
    arithmetic_words: ClassVar[dict[str, str]] = {
        "+": "plus",
        "-": "minus",
        "×": "times",
        "÷": "divided by",
        "=": "equals",
    }
    weekdays = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
    months = _MONTHS
    or_more_template = "{n} plus"
    out_of_template = "{a} out of {b}"
    feet_inches_template = "{ft} foot {inch}"
    ratio_word = "to"
    percent_template = "{n} percent"
    point_word = "point"
    address_dot_word = "dot"
    plus_word = "plus"
    grade_signs = ("plus", "minus")
    blood_signs = ("positive", "negative")
    number_template = "number {n}"
    times_template = "{n} times"
    by_word = "by"
    version_word = "version"
    slash_word = "slash"
    scale_words: ClassVar[dict[str, str]] = {
        "m": "million",
        "b": "billion",
        "t": "trillion",
        "lk": "lakh",
        "cr": "crore",
    }
    units: ClassVar[dict[str, tuple[str, str]]] = {
        "km": _plural("kilometre"), "m": _plural("metre"), "cm": _plural("centimetre"),
        "mm": _plural("millimetre"), "kg": _plural("kilogram"), "g": _plural("gram"),
        "mg": _plural("milligram"), "l": _plural("litre"), "ml": _plural("millilitre"),
        "gb": _plural("gigabyte"), "mb": _plural("megabyte"), "tb": _plural("terabyte"),
        "kb": _plural("kilobyte"), "mbps": _plural("megabit per second", "megabits per second"),
        "kmh": _plural("kilometre per hour", "kilometres per hour"),
        "c": _plural("degree Celsius", "degrees Celsius"),
        "f": _plural("degree Fahrenheit", "degrees Fahrenheit"), "deg": _plural("degree"),
        "tbsp": _plural("tablespoon"), "tsp": _plural("teaspoon"),
        "mah": _plural("milliamp hour"), "kw": _plural("kilowatt"), "w": _plural("watt"),
        "mmhg": _plural("millimetre of mercury", "millimetres of mercury"),
        "bpm": _plural("beat per minute", "beats per minute"),
        "mmol": _plural("millimole per litre", "millimoles per litre"),
        "ghz": _plural("gigahertz", "gigahertz"),
        "mhz": _plural("megahertz", "megahertz"), "hz": _plural("hertz", "hertz"),
        "ft": _plural("foot", "feet"), "pts": _plural("point"),
        "mbs": _plural("megabyte per second", "megabytes per second"),
        "gbs": _plural("gigabyte per second", "gigabytes per second"),
        "kwh": _plural("kilowatt hour"), "min": _plural("minute"), "hr": _plural("hour"),
        "sec": _plural("second"), "sqft": _plural("square foot", "square feet"),
        "bmi": _plural("kilogram per square metre", "kilograms per square metre"),
        "lb": _plural("pound"), "oz": _plural("ounce"), "mph": _plural("mile per hour", "miles per hour"),
        "mi": _plural("mile"), "sen": _plural("sen", "sen"),
        "kcal": _plural("kilocalorie"),
        "msec": _plural("millisecond"), "mth": _plural("month"), "yr": _plural("year"), "wk": _plural("week"),
        "m2": _plural("square metre"), "km2": _plural("square kilometre"),
    }  # fmt: skip
    per_units: ClassVar[dict[str, str]] = {
        "kg": "{n} per kilogram", "g": "{n} per gram", "km": "{n} per kilometre", "l": "{n} per litre",
        "hr": "{n} per hour", "month": "{n} per month", "day": "{n} per day", "year": "{n} per year",
        "night": "{n} per night", "person": "{n} per person",
    }  # fmt: skip
    currencies: ClassVar[dict[str, tuple[str, str, str, str]]] = {
        "rm": ("ringgit", "ringgit", "sen", "sen"),
        "dollar": ("dollar", "dollars", "cent", "cents"),
        "usd": ("US dollar", "US dollars", "cent", "cents"),
        "sgd": ("Singapore dollar", "Singapore dollars", "cent", "cents"),
        "aud": ("Australian dollar", "Australian dollars", "cent", "cents"),
        "eur": ("euro", "euros", "cent", "cents"),
        "gbp": ("pound", "pounds", "penny", "pence"),
        "jpy": ("yen", "yen", "", ""),
        "yen_sign": ("yen", "yen", "", ""),
        "inr": ("rupee", "rupees", "paisa", "paise"),
        "cny": ("yuan", "yuan", "", ""),
        "thb": ("baht", "baht", "satang", "satang"),
        "hkd": ("Hong Kong dollar", "Hong Kong dollars", "cent", "cents"),
        "twd": ("New Taiwan dollar", "New Taiwan dollars", "cent", "cents"),
        "krw": ("won", "won", "", ""),
        "idr": ("rupiah", "rupiah", "sen", "sen"),
    }

    def year(self, n: int) -> str:
        return numbers_en.year(n)

    def time(self, hour: int, minute: int, period: str | None) -> str:
        """For example "three p m", "nine oh five a m", "ten o'clock"."""
        words = [self.cardinal(hour)]
        if minute:
            words.append(f"oh {numbers_en.DIGITS[minute]}" if minute < 10 else self.cardinal(minute))
        if period:
            words.append("a m" if period == "am" else "p m")
        elif not minute:
            words.append("o'clock")
        return " ".join(words)

    def date(self, day: int, month: int, year: int | None) -> str:
        """For example "the twelfth of September twenty twenty six"."""
        spoken = f"the {self.ordinal(day)} of {_MONTHS[month - 1]}"
        return f"{spoken} {self.year(year)}" if year else spoken

    def month_first_date(self, day: int, month: int, year: int | None) -> str:
        """For example "September twelfth, twenty twenty six"."""
        spoken = f"{_MONTHS[month - 1]} {self.ordinal(day)}"
        return f"{spoken}, {self.year(year)}" if year else spoken

    def day_of_month(self, day: int, month: int | None, year: int | None) -> str:
        return self.date(day, month, year) if month else f"the {self.ordinal(day)}"

    def mixed(self, whole: int, numerator: int, denominator: int) -> str:
        """For example "two and a half", "one and three quarters"."""
        fraction = self.fraction(numerator, denominator)
        if numerator == 1 and denominator <= 10:
            fraction = "a " + fraction.removeprefix("one ")
        return f"{self.cardinal(whole)} and {fraction}"

    def fraction(self, numerator: int, denominator: int) -> str:
        """For example "one half", "three quarters", "two thirds", "five over sixteen"."""
        if denominator > 10 or denominator < 2:
            return f"{self.cardinal(numerator)} over {self.cardinal(denominator)}"
        one, many = _FRACTIONS.get(denominator) or (
            self.ordinal(denominator),
            self.ordinal(denominator) + "s",
        )
        return f"{self.cardinal(numerator)} {one if numerator == 1 else many}"
