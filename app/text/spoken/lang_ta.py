"""Tamil phrasing: "ஆயிரத்து இருநூற்று ஐம்பது ரிங்கிட் ஐம்பது சென்", "மதியம் மூன்று மணி",
"பன்னிரண்டு செப்டம்பர் இரண்டாயிரத்து இருபத்தாறு", "பதினைந்து சதவீதம்".

Dates follow the written Tamil order day, month, year, with English month names in Tamil script.
Explicit million/billion stay words (மில்லியன், பில்லியன்), as Malaysian Tamil writes them. Times of
day: காலை (a.m.), நள்ளிரவு (12 a.m.), மதியம் (12-3 p.m.), மாலை (4-6 p.m.), இரவு (7-11 p.m.).
"""

from __future__ import annotations

from typing import ClassVar

from app.text.spoken import numbers_ta
from app.text.spoken.speaker import Speaker

__all__ = ["TAMIL_MEASURE_WORDS", "Tamil"]

# a number before one of these nouns is counted: ஒன்று becomes ஒரு ("இருபத்தொரு வயது")
TAMIL_MEASURE_WORDS = (
    "நாள்", "நாட்க", "வயது", "மணி", "முறை", "பேர", "வார", "மாத", "ஆண்டு", "வருட", "நிமிட", "வினாடி",
    "கிலோ", "லிட்டர்", "இலக்க", "தேர்வு", "வாடிக்கையாளர்", "பொருள்", "இருக்கை", "அறை", "டிக்கெட்",
)  # fmt: skip

_MONTHS = (
    "ஜனவரி", "பிப்ரவரி", "மார்ச்", "ஏப்ரல்", "மே", "ஜூன்", "ஜூலை", "ஆகஸ்ட்", "செப்டம்பர்", "அக்டோபர்",
    "நவம்பர்", "டிசம்பர்",
)  # fmt: skip
_FRACTIONS = {(1, 2): "அரை", (1, 4): "கால்", (3, 4): "முக்கால்"}


def _same(template: str) -> tuple[str, str]:
    return template, template


def _day_part(hour: int, period: str | None) -> str:
    """The part of the day said before a 12-hour clock time ("" without a period)."""
    if period == "am":
        return "நள்ளிரவு" if hour == 12 else "காலை"
    if period == "pm":
        return "மதியம்" if hour == 12 or hour <= 3 else "மாலை" if hour <= 6 else "இரவு"
    return ""


class Tamil(Speaker):
    code = "ta"
    numbers = numbers_ta
    minus_word = "மைனஸ்"
    to_word = "முதல்"
    star_word = "ஸ்டார்"
    hash_word = "ஹாஷ்"
    approx_word = "சுமார்"
    and_word = "மற்றும்"
    copyright_word = "பதிப்புரிமை"
    comparison_words: ClassVar[dict[str, str]] = {
        "≥": "குறைந்தது",
        "≤": "அதிகபட்சம்",
        "±": "கூட்டல் கழித்தல்",
        "≈": "சுமார்",
    }
    arithmetic_words: ClassVar[dict[str, str]] = {
        "+": "கூட்டல்",
        "-": "கழித்தல்",
        "×": "பெருக்கல்",
        "÷": "வகுத்தல்",
        "=": "சமம்",
    }
    weekdays = ("திங்கள்", "செவ்வாய்", "புதன்", "வியாழன்", "வெள்ளி", "சனி", "ஞாயிறு")
    months = _MONTHS
    feet_inches_template = "{ft} அடி {inch} அங்குலம்"
    hour_word = "மணி"
    percent_template = "{n} சதவீதம்"
    point_word = "புள்ளி"
    address_dot_word = "புள்ளி"
    plus_word = "பிளஸ்"
    grade_signs = ("பிளஸ்", "மைனஸ்")
    blood_signs = ("பாசிட்டிவ்", "நெகட்டிவ்")
    number_template = "எண் {n}"
    times_template = "{n} மடங்கு"
    by_word = "பெருக்கல்"
    version_word = "பதிப்பு"
    slash_word = "ஸ்லாஷ்"
    scale_words: ClassVar[dict[str, str]] = {
        "m": "மில்லியன்",
        "b": "பில்லியன்",
        "t": "டிரில்லியன்",
        "lk": "லட்சம்",
        "cr": "கோடி",
    }
    units: ClassVar[dict[str, tuple[str, str]]] = {
        "km": _same("{n} கிலோமீட்டர்"), "m": _same("{n} மீட்டர்"), "cm": _same("{n} சென்டிமீட்டர்"),
        "mm": _same("{n} மில்லிமீட்டர்"), "kg": _same("{n} கிலோகிராம்"), "g": _same("{n} கிராம்"),
        "mg": _same("{n} மில்லிகிராம்"), "l": _same("{n} லிட்டர்"), "ml": _same("{n} மில்லிலிட்டர்"),
        "gb": _same("{n} ஜிபி"), "mb": _same("{n} எம்பி"), "tb": _same("{n} டிபி"), "kb": _same("{n} கேபி"),
        "mbps": _same("{n} எம்பிபிஎஸ்"), "kmh": _same("மணிக்கு {n} கிலோமீட்டர்"),
        "c": _same("{n} டிகிரி செல்சியஸ்"), "f": _same("{n} டிகிரி ஃபாரன்ஹீட்"), "deg": _same("{n} டிகிரி"),
        "tbsp": _same("{n} மேசைக்கரண்டி"), "tsp": _same("{n} தேக்கரண்டி"),
        "mah": _same("{n} மில்லிஆம்பியர் மணி"), "kw": _same("{n} கிலோவாட்"), "w": _same("{n} வாட்"),
        "mmhg": _same("{n} மில்லிமீட்டர் பாதரசம்"), "bpm": _same("நிமிடத்திற்கு {n} துடிப்புகள்"),
        "mmol": _same("ஒரு லிட்டருக்கு {n} மில்லிமோல்"),
        "ghz": _same("{n} ஜிகாஹெர்ட்ஸ்"), "mhz": _same("{n} மெகாஹெர்ட்ஸ்"), "hz": _same("{n} ஹெர்ட்ஸ்"),
        "ft": _same("{n} அடி"), "pts": _same("{n} புள்ளிகள்"), "mbs": _same("வினாடிக்கு {n} எம்பி"),
        "gbs": _same("வினாடிக்கு {n} ஜிபி"),
        "kwh": _same("{n} கிலோவாட் மணி"),
        "min": _same("{n} நிமிடம்"), "hr": _same("{n} மணி நேரம்"), "sec": _same("{n} வினாடி"),
        "bmi": _same("சதுர மீட்டருக்கு {n} கிலோகிராம்"),
        "lb": _same("{n} பவுண்டு"), "oz": _same("{n} அவுன்ஸ்"), "mph": _same("மணிக்கு {n} மைல்"),
        "mi": _same("{n} மைல்"), "sen": _same("{n} சென்"),
        "kcal": _same("{n} கிலோகலோரி"),
        "msec": _same("{n} மில்லி வினாடி"), "mth": _same("{n} மாதம்"), "yr": _same("{n} ஆண்டு"),
        "wk": _same("{n} வாரம்"),
        "sqft": _same("{n} சதுர அடி"), "m2": _same("{n} சதுர மீட்டர்"), "km2": _same("{n} சதுர கிலோமீட்டர்"),
    }  # fmt: skip
    per_units: ClassVar[dict[str, str]] = {
        "kg": "ஒரு கிலோகிராமுக்கு {n}", "g": "ஒரு கிராமுக்கு {n}", "km": "ஒரு கிலோமீட்டருக்கு {n}",
        "l": "ஒரு லிட்டருக்கு {n}", "hr": "மணிக்கு {n}", "month": "மாதத்திற்கு {n}", "day": "ஒரு நாளைக்கு {n}",
        "year": "ஆண்டுக்கு {n}", "night": "ஓர் இரவுக்கு {n}", "person": "ஒருவருக்கு {n}",
    }  # fmt: skip
    currencies: ClassVar[dict[str, tuple[str, str, str, str]]] = {
        "rm": ("ரிங்கிட்", "ரிங்கிட்", "சென்", "சென்"),
        "dollar": ("டாலர்", "டாலர்", "சென்ட்", "சென்ட்"),
        "usd": ("அமெரிக்க டாலர்", "அமெரிக்க டாலர்", "சென்ட்", "சென்ட்"),
        "sgd": ("சிங்கப்பூர் டாலர்", "சிங்கப்பூர் டாலர்", "சென்ட்", "சென்ட்"),
        "aud": ("ஆஸ்திரேலிய டாலர்", "ஆஸ்திரேலிய டாலர்", "சென்ட்", "சென்ட்"),
        "eur": ("யூரோ", "யூரோ", "சென்ட்", "சென்ட்"),
        "gbp": ("பவுண்ட்", "பவுண்ட்", "பென்ஸ்", "பென்ஸ்"),
        "jpy": ("யென்", "யென்", "", ""),
        "yen_sign": ("யென்", "யென்", "", ""),
        "inr": ("ரூபாய்", "ரூபாய்", "பைசா", "பைசா"),
        "cny": ("யுவான்", "யுவான்", "", ""),
        "thb": ("பாட்", "பாட்", "சதாங்", "சதாங்"),
        "hkd": ("ஹாங்காங் டாலர்", "ஹாங்காங் டாலர்", "சென்ட்", "சென்ட்"),
        "twd": ("தைவான் டாலர்", "தைவான் டாலர்", "சென்ட்", "சென்ட்"),
        "krw": ("வோன்", "வோன்", "", ""),
        "idr": ("ரூபியா", "ரூபியா", "சென்", "சென்"),
    }

    def count(self, n: int) -> str:
        """Before a noun, a final ஒன்று is ஒரு: "ஒரு ரிங்கிட்", "இருபத்தொரு நாட்கள்", "பதினொரு"."""
        spoken = self.cardinal(n)
        return spoken[: -len("ன்று")] + "ரு" if spoken.endswith("ஒன்று") or spoken.endswith("ொன்று") else spoken

    def time(self, hour: int, minute: int, period: str | None) -> str:
        """For example "மதியம் மூன்று மணி", "காலை பத்து மணி முப்பது நிமிடம்"."""
        words = [_day_part(hour, period), self.count(hour), "மணி"]
        if minute:
            words += [self.count(minute), "நிமிடம்"]
        return self.join(words)

    def time_before_hour_word(self, hour: int, minute: int, period: str | None) -> str:
        """ "9:30 மணிக்கு" -> "ஒன்பது முப்பது மணிக்கு": the written மணி says the hour."""
        return self.join([_day_part(hour, period), self.count(hour), self.count(minute) if minute else ""])

    def date(self, day: int, month: int, year: int | None) -> str:
        """For example "பன்னிரண்டு செப்டம்பர் இரண்டாயிரத்து இருபத்தாறு"."""
        return self.join([self.cardinal(day), _MONTHS[month - 1], self.cardinal(year) if year else ""])

    def day_of_month(self, day: int, month: int | None, year: int | None) -> str:
        return self.date(day, month, year) if month else self.join([numbers_ta.ordinal(day), "தேதி"])

    def ratio(self, *parts: str) -> str:
        """For example "பதினாறுக்கு ஒன்பது" (16:9): each number but the last takes க்கு."""
        words = []
        for part in parts[:-1]:
            head, _, last = self.number(part).rpartition(" ")
            words += [head, numbers_ta.join_suffix(last, "க்கு")]
        return self.join([*words, self.number(parts[-1])])

    def or_more(self, spoken: str) -> str:
        """For example "பதினெட்டுக்கு மேல்" (18+)."""
        head, _, last = spoken.rpartition(" ")
        return self.join([head, numbers_ta.join_suffix(last, "க்கு"), "மேல்"])

    def out_of(self, score: str, top: str) -> str:
        """For example "ஐந்துக்கு நான்கு புள்ளி ஐந்து" (4.5/5)."""
        head, _, last = top.rpartition(" ")
        return self.join([head, numbers_ta.join_suffix(last, "க்கு"), score])

    def mixed(self, whole: int, numerator: int, denominator: int) -> str:
        """For example "இரண்டரை" (2 1/2), "இரண்டே கால்" (2 1/4), "இரண்டே முக்கால்" (2 3/4), otherwise
        "இரண்டு முழு மூன்றில் ஒன்று"."""
        head, _, last = self.cardinal(whole).rpartition(" ")
        if last.endswith("\u0bc1") and (numerator, denominator) in _FRACTIONS:  # a number word ending in u
            if (numerator, denominator) == (1, 2):
                return self.join([head, last[:-1] + "ரை"])
            return self.join([head, numbers_ta.attach(last, "ே"), _FRACTIONS[numerator, denominator]])
        return self.join([self.cardinal(whole), "முழு", self.fraction(numerator, denominator)])

    def fraction(self, numerator: int, denominator: int) -> str:
        """For example "அரை", "கால்", "முக்கால்", otherwise "மூன்றில் இரண்டு" (two of three)."""
        known = _FRACTIONS.get((numerator, denominator))
        if known:
            return known
        head, _, last = self.cardinal(denominator).rpartition(" ")
        return self.join([head, numbers_ta.attach(last, "ில்"), self.cardinal(numerator)])
