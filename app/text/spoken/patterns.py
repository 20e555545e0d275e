r"""The regular expressions of the spoken normalizer, compiled once at import (no I/O).

``LETTER_ENTITY`` and ``OTHER_ENTITY`` are alternations of named groups, tried at a candidate
position (``core``), where the earlier alternative wins (an email before a code, a date before a
range, a time before a plain number). The outer group of each alternative names its handler in
``entities.py``. ``\w`` and ``\d`` are ASCII-only (``re.ASCII``): a number glued to Chinese or Tamil
text ("电话012...", "5க்கு") is still a whole token; other digits are made ASCII before matching.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.text.spoken.abbreviations import ABBREVIATION

__all__ = [
    "ABBREVIATION_HINT", "AREA_CODE", "COMPARISON", "CURRENCIES", "CURRENCY_NAME", "DAY_PARTS",
    "DIGIT_ANCHOR", "DIGIT_CUES", "GRADE", "GRADE_HINT", "HB_DATE", "HINT_WORDS",
    "KEYPAD_KEY", "LETTER_ENTITY", "MONTHS", "MONTH_LANGUAGE", "OTHER_ENTITY", "PER_UNITS",
    "PHONE_CUES", "PLATE_WORD", "PREFIX_WORDS", "RANGE_DASH", "RANGE_END_DATE", "RANGE_END_TIME",
    "ROAD_NUMBER", "ROAD_WORDS", "SHORT_DAY_PART", "TIME", "UNICODE_DIGIT", "UNITS", "UNIT_AFTER", "URL_HINT",
    "VERSION_CUES", "WEEKDAYS", "YEAR_CUES", "ZH_PHONE_CUES", "entity_pattern", "prefix_tree",
]  # fmt: skip

# surface -> key ----------------------------------------------------------------------------------
CURRENCIES = {
    "RM": "rm", "MYR": "rm", "USD": "usd", "US$": "usd", "SGD": "sgd", "S$": "sgd", "AUD": "aud",
    "A$": "aud", "EUR": "eur", "€": "eur", "GBP": "gbp", "£": "gbp", "JPY": "jpy", "$": "dollar",
    "INR": "inr", "Rs.": "inr", "Rs": "inr", "₹": "inr", "CNY": "cny", "RMB": "cny", "THB": "thb",
    "฿": "thb", "HKD": "hkd", "HK$": "hkd", "TWD": "twd", "NT$": "twd", "KRW": "krw", "₩": "krw",
    "IDR": "idr", "Rp": "idr", "ரூ.": "inr", "ரூ": "inr",
    # the yen sign: yen, but yuan in Mandarin, where it marks the renminbi (also written full width)
    "¥": "yen_sign", "￥": "yen_sign",
}  # fmt: skip
UNITS = {
    "km/h": "kmh", "km/j": "kmh", "kmj": "kmh", "kmh": "kmh", "kph": "kmh", "km²": "km2", "m²": "m2",
    "sq ft": "sqft", "sqft": "sqft", "kWh": "kwh", "Mbps": "mbps", "km": "km", "kg": "kg", "mg": "mg",
    "cm": "cm", "mm": "mm", "ml": "ml", "mL": "ml", "m": "m", "g": "g", "l": "l", "L": "l", "GB": "gb",
    "MB": "mb", "TB": "tb", "KB": "kb", "°C": "c", "ºC": "c", "℃": "c", "°F": "f", "ºF": "f", "°": "deg",
    "mmHg": "mmhg", "bpm": "bpm", "mmol/L": "mmol", "mAh": "mah", "kW": "kw", "W": "w", "GHz": "ghz",
    "MHz": "mhz", "Hz": "hz", "tbsp": "tbsp", "tsp": "tsp", "ft": "ft", "pts": "pts", "MB/s": "mbs",
    "GB/s": "gbs", "mins": "min", "min": "min", "hrs": "hr", "hr": "hr", "secs": "sec", "sec": "sec",
    "ms": "msec", "mths": "mth", "mth": "mth", "mos": "mth", "yrs": "yr", "yr": "yr", "wks": "wk", "wk": "wk",
    "kg/m²": "bmi", "kg/m2": "bmi",
    "mgu": "wk", "mgg": "wk", "thn": "yr", "lbs": "lb", "lb": "lb", "oz": "oz", "mph": "mph", "mi": "mi",
    "sen": "sen", "kcal": "kcal",
    # Tamil abbreviations: kilometre, metre, centimetre, kilogram
    "கி.மீ.": "km", "கி.மீ": "km", "கிமீ": "km", "மீ.": "m", "மீ": "m", "செ.மீ.": "cm", "செ.மீ": "cm",
    "கி.கி.": "kg", "கி.கி": "kg",
}  # fmt: skip
PER_UNITS = {
    "kg": "kg", "g": "g", "km": "km", "l": "l", "L": "l", "litre": "l", "liter": "l", "h": "hr", "hr": "hr",
    "hour": "hr", "jam": "hr", "month": "month", "mth": "month", "mo": "month", "bulan": "month",
    "bln": "month", "day": "day", "hari": "day", "year": "year", "yr": "year", "tahun": "year",
    "thn": "year", "night": "night", "malam": "night", "pax": "person", "person": "person",
    "orang": "person", "org": "person", "月": "month", "天": "day", "晚": "night", "人": "person",
    "公斤": "kg", "小时": "hr", "年": "year", "மாதம்": "month", "நாள்": "day",
}  # fmt: skip
MONTHS = {
    "January": 1, "February": 2, "March": 3, "April": 4, "May": 5, "June": 6, "July": 7, "August": 8,
    "September": 9, "October": 10, "November": 11, "December": 12, "Januari": 1, "Februari": 2, "Mac": 3,
    "Mei": 5, "Jun": 6, "Julai": 7, "Ogos": 8, "Oktober": 10, "Disember": 12, "Jan": 1, "Feb": 2,
    "Mar": 3, "Apr": 4, "Jul": 7, "Aug": 8, "Ogo": 8, "Sep": 9, "Sept": 9, "Oct": 10, "Okt": 10,
    "Nov": 11, "Dec": 12, "Dis": 12,
}  # fmt: skip
# month names spelled in only one of Malay and English
_MALAY_ONLY = ("Januari", "Februari", "Mac", "Mei", "Julai", "Ogos", "Oktober", "Disember", "Okt", "Dis",
               "Ogo")  # fmt: skip
_ENGLISH_ONLY = ("January", "February", "March", "May", "July", "August", "October", "December", "Mar", "Aug",
                 "Oct", "Dec")  # fmt: skip
MONTH_LANGUAGE = {**dict.fromkeys(_MALAY_ONLY, "ms"), **dict.fromkeys(_ENGLISH_ONLY, "en")}
# a number of three or more digits after one of these words is a phone number, read digit by digit
PHONE_CUES = frozenset(("dial", "call", "hotline", "hubungi", "dail", "telefon", "talian"))
ZH_PHONE_CUES = ("拨打", "致电", "热线", "电话", "分机")
# a number of four or more digits after one of these words is read digit by digit
DIGIT_CUES = frozenset(
    """
account acc akaun order pesanan tracking ref reference rujukan ticket tiket case kes booking tempahan invoice
invois policy polisi otp tac pin code kod passport pasport ic mykad serial siri member ahli card kad
transaction transaksi resit receipt id postcode poskod nombor number no
""".split()  # noqa: SIM905
)
# a dotted number after one of these words is a version: "version 2.10" -> "version two point ten"
VERSION_CUES = frozenset(("version", "versi", "ver", "firmware", "android", "ios"))
# a year (1000-2099) after one of these words is read as a year in English
YEAR_CUES = frozenset(
    "in since year years by until till from before after of circa around during class".split()  # noqa: SIM905
)


def _alternation(surfaces: Iterable[str]) -> str:
    return "|".join(re.escape(s) for s in sorted(surfaces, key=len, reverse=True))


_MINUS = "\u2212"  # the minus sign, read like a hyphen-minus
_TERM = r"\d+(?:\.\d+)?"  # a number in a sum: "2 + 2 = 4"
# words after "4K" that make it a picture's resolution ("4K TV"), not four thousand
_SCREEN = (
    "TVs?|UHD|HDR|video|videos|display|displays|monitor|monitors|resolution|screen|screens|camera|cameras"
    "|streaming|OLED|QLED|Blu-ray|footage|recording|HD"
)
# letter runs before a number that are not a vehicle plate ("OTP 1234", "SPM 2024" is excluded as a year)
_NOT_PLATES = "|".join(
    "ACC AM ATM CNY FY GST KM KG MB GB KB TB NRIC PM PRU PMR REF SPM SST STPM TAC TNB".split()  # noqa: SIM905
)
# a number: grouped in thousands (1,250.50), in the Indian way (1,50,000: lakhs and crores), or not at all
_NUM = r"(?:\d{1,2}(?:,\d\d)+,\d{3}(?:\.\d+)?|\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_DOTTED = r"\d{1,3}(?:\.\d{3}){2,}(?:,\d{1,2})?(?!\d|\.\d)"  # thousands grouped with dots: Rp1.500.000
_AMPM = r"(?:[aApP]\.?[mM]\.?)(?![A-Za-z])"
_SCALE = (
    r"(?:k|K|thousand|ribu|mil|million|mn|m|M|juta|Juta|j|J|trillion|trilion|tn|டிரில்லியன்|bil|billion|bilion|bn|b|B|மில்லியன்|பில்லியன்"
    r"|crores?|lakhs?|கோடி|லட்சம்|百万|千万|万亿|万|亿)(?![A-Za-z])"
)
_CUR = _alternation(CURRENCIES)
CURRENCY_NAME = re.compile(
    r"\s?(?:(?:ringgit|dollars?|rupees?|euros?|pounds?|yen|yuan|baht|won|rupiah)(?![A-Za-z])"
    r"|元(?!旦)|块|圆|令吉|(?:ரூபாய்|ரிங்கிட்)(?!\w))"
)
"""A currency's name written after an amount that has its sign ("RM50 ringgit", "¥1,299.99元"): the
amount's reading already names it (``entities``)."""
# a comparison sign before a number or an amount: "≥ 18", "< RM50" (``core``)
COMPARISON = re.compile(rf"[≥≤<>±≈](?=\s?(?:\d|{_CUR}))")
_CODES = _alternation(c for c in CURRENCIES if re.fullmatch("[A-Z]{3}", c))  # ISO 4217 codes: MYR, USD
_MONTH = _alternation(MONTHS)
_PER = rf"(?:{_alternation(PER_UNITS)})(?![A-Za-z])"
_DASH = r"\s?[-–~～]\s?"  # a tilde between numbers is a range too: "22~30℃"
RANGE_DASH = re.compile(_DASH)
"""The dash of a range, matched after its first end ("1 Jan - 31 Mac", "10hb-12hb", "28°C~33°C")."""
_URL_BODY = r"[A-Za-z0-9\-._~:/?#@!$&'()*+;=%]"
_URL_END = r"[A-Za-z0-9/_\-=#&%~+]"  # a URL does not end with . , : ; ! ? or )

_WEEKDAY_SHORT = {
    "Mon": 0, "Tue": 1, "Tues": 1, "Wed": 2, "Thu": 3, "Thur": 3, "Thurs": 3, "Fri": 4, "Sat": 5, "Sun": 6,
}  # fmt: skip
WEEKDAYS = {
    "Monday": 0, "Tuesday": 1, "Wednesday": 2, "Thursday": 3, "Friday": 4, "Saturday": 5, "Sunday": 6,
    **_WEEKDAY_SHORT, "Isnin": 0, "Selasa": 1, "Rabu": 2, "Khamis": 3, "Jumaat": 4, "Sabtu": 5, "Ahad": 6,
}  # fmt: skip
_WEEKDAY = _alternation(WEEKDAYS)
_DAY_SHORT = _alternation(_WEEKDAY_SHORT)  # alone, read only before a date or a time
_DATE_OR_TIME = (
    rf"(?:\d{{1,2}}(?:[:.]\d\d)?\s?{_AMPM}|\d{{1,2}}[:.]\d\d|\d{{1,2}}(?:st|nd|rd|th)?\s(?:{_MONTH})\b"
    r"|\d{1,2}/\d{1,2})"
)
# a Malay day of the month, "3hb Ogos", "14 hb. September 2026"
HB_DATE = re.compile(
    rf"(?<![\w.])(?P<hd>[0-3]?\d)\s?[hH][bB]\.?(?:\s(?P<hm>{_MONTH})\.?(?:,?\s(?P<hy>\d{{4}}))?)?(?!\w)",
    re.ASCII,
)
# Malay parts of the day written short after a clock time ("10:30pg", "2.30 ptg", "8.00 mlm") or glued to
# it in full ("3petang"): the word each stands for, and its half of the day on a 12-hour clock. Malam
# follows only a time with minutes: after a bare number it counts nights ("3 hari 2 mlm").
DAY_PARTS = {
    "pg": ("pagi", "am"), "ptg": ("petang", "pm"), "tgh": ("tengah hari", "pm"),
    "tgh hari": ("tengah hari", "pm"), "tgh mlm": ("tengah malam", "am"), "mlm": ("malam", "pm"),
    "pagi": ("pagi", "am"), "petang": ("petang", "pm"), "malam": ("malam", "pm"),
}  # fmt: skip
# the short forms but mlm, which after a bare number counts nights
_SHORT = _alternation(key for key, (word, _) in DAY_PARTS.items() if key != word and key != "mlm")
SHORT_DAY_PART = re.compile(rf"\s?(?P<part>(?i:{_SHORT}))(?!\w)")
"""A short Malay part of the day after a number ("2-4ptg"); malam is left out: after a bare number it
counts nights."""
_DAY_PART_AFTER_MINUTES = rf"\s?(?P<mpart>(?i:{_SHORT}|mlm))|(?P<mfull>(?i:pagi|petang|malam))"


_MEASURE = rf"(?:{_alternation(UNITS)}|times|percent|per)(?![A-Za-z])"


def _time_pattern(night_after_hour: bool) -> str:
    """The clock times; ``night_after_hour``: a bare hour may take malam too, and a part of the day written
    in full after a space ("10pg-10mlm", "10pg - 10 malam": the dash before it makes it a time)."""
    if night_after_hour:
        after_hour = rf"\s?(?:(?P<bpart>(?i:{_SHORT}|mlm))|(?P<bfull>(?i:pagi|petang|malam)))"
    else:
        after_hour = rf"\s?(?P<bpart>(?i:{_SHORT}))|(?P<bfull>(?i:pagi|petang))"
    forms = (
        rf"(?P<mh>[01]?\d|2[0-3])[:.](?P<mmin>[0-5]\d)(?:{_DAY_PART_AFTER_MINUTES})(?!\w)",
        rf"(?P<bh>1[0-2]|0?[1-9])(?:{after_hour})(?!\w)",
        rf"(?P<th>[01]?\d|2[0-4]):(?P<tmin>[0-5]\d)(?::[0-5]\d)?(?:\s?(?P<tap>{_AMPM}))?(?![\w:])",
        rf"(?P<dh>1[0-2]|0?[1-9])\.(?P<dmin>[0-5]\d)"
        rf"(?:\s?(?P<dap>{_AMPM})|(?=\s?(?:pagi|petang|malam|tengah)\b|\s?மணி))",
        # a dotted time after a clock word: "pukul 3.30", "at 12.30" (not "at 3.45%", "at 2.50 kg")
        r"(?:(?<=pukul )|(?<=Pukul )|(?<=jam )|(?<=at )|(?<=At )|(?<=before )|(?<=after )|(?<=until )"
        rf"|(?<=till ))(?P<ph>[01]?\d|2[0-3])\.(?P<pmin>[0-5]\d)(?![\d%°A-Za-z]|\.\d|\s?{_MEASURE})",
        rf"(?P<hh>1[0-2]|0?[1-9])\s?(?P<hap>{_AMPM})",
        # 24-hour time in four digits: "0930 hrs" always, "1700 hrs" after a clock word (else a duration)
        r"(?P<xh>0\d)(?P<xmin>[0-5]\d)\s?(?:hrs|Hrs|HRS|hours|H)(?!\w)",
        r"(?:(?<=at )|(?<=At )|(?<=by )|(?<=from )|(?<=until )|(?<=till )|(?<=to )|(?<=pada )|(?<=pukul )"
        r"|(?<=hingga )|(?<=- )|(?<=-))(?P<yh>1\d|2[0-3])(?P<ymin>[0-5]\d)\s?(?:hrs|Hrs|HRS|H)(?!\w)",
    )
    return "(?<![\\w.:])(?:" + "|".join(forms) + ")"


TIME = re.compile(_time_pattern(night_after_hour=False), re.ASCII)
RANGE_END_TIME = re.compile(_time_pattern(night_after_hour=True), re.ASCII)
"""A clock time after a dash that follows another: a bare hour before malam is a time there too."""

# a numeric date: day first (12/9/2026), year first (2026-09-12), or ISO 8601 with its time; a dash may
# follow it only to start another date ("1/12/2025-31/12/2025")
_DATE = (
    r"(?:(?P<d1>[0-3]?\d)(?P<ds>[/.-])(?P<m1>[01]?\d)(?P=ds)(?P<y1>\d{4}|\d{2})"
    r"|(?P<iy>\d{4})(?P<is>[-/.])(?P<im>[01]?\d)(?P=is)(?P<id>[0-3]?\d)"
    r"(?:T(?P<ith>[01]\d|2[0-3]):(?P<itm>[0-5]\d)(?::[0-5]\d(?:\.\d+)?)?(?P<itz>Z|[+-][01]\d:?[0-5]\d)?)?)"
    r"(?![\w/]|\.\d|-(?![0-3]?\d[/.][01]?\d[/.]\d{2,4}(?![\w/-])))"
)
UNIT_AFTER = re.compile(rf"\s?(?P<uk>{_alternation(UNITS)})(?![\w/²³\u0b80-\u0bff])", re.ASCII)
"""A unit right after a fraction ("½ tsp", "1 1/2 kg"), read with it."""
RANGE_END_DATE = re.compile(f"(?P<date>{_DATE})", re.ASCII)
"""A numeric date right after a range dash (the dash is before it, so no look behind)."""

GRADE = re.compile(
    r"(?<![\w+\-\u2212])(?P<grn>[1-9]\d?)?(?P<grl>AB|[A-FO])(?P<grs>[+\-\u2212])(?![\w+\u2212-])",
    re.ASCII,
)
"""A letter grade or a blood group with its sign: "A+", "9A+" (nine A pluses), "B-", "O+", "AB-"."""
GRADE_HINT = re.compile(r"(?:AB|[A-FO])[+\-\u2212](?![\w+\u2212-])", re.ASCII)
"""Where a grade may start (``core``): a scan without ``GRADE``'s look-behind is a few times faster."""
# a lone keypad key: "press # to confirm" (``core``; read as the key only near a keypad word)
KEYPAD_KEY = re.compile(r"(?<![\w*#])[#*](?![\w*#])", re.ASCII)

_ALTERNATIVES = (
    (
        "email",
        r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?!\w)",
    ),
    (
        "url",
        rf"(?<![\w@./])(?:https?://{_URL_BODY}*{_URL_END}|(?:www\.)?[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
        r"(?:\.[A-Za-z0-9-]+)*\.(?:com|net|org|gov|edu|my|io|asia|info|biz|co|sg|ai|app)(?:\.[a-z]{2})?"
        rf"(?![\w-])(?:/{_URL_BODY}*{_URL_END})?)",
    ),
    ("abbr", ABBREVIATION),
    (
        "money",
        rf"(?:(?<![\w.])(?P<msign>[-{_MINUS}+]))?(?<![A-Za-z])(?P<cur>{_CUR})(?:\s?(?P<csign>[-{_MINUS}]))?\s?"
        rf"(?P<amt>{_DOTTED}|{_NUM})(?:\s?(?P<scale>{_SCALE}))?"
        rf"(?:{_DASH}(?:{_CUR})?\s?(?P<amt2>{_DOTTED}|{_NUM})(?:\s?(?P<scale2>{_SCALE}))?)?(?:\s?/\s?(?P<per>{_PER}))?",
    ),
    (
        "days",
        rf"(?<![\w.])(?:(?P<wa>{_WEEKDAY})\.?\s?[-–]\s?(?P<wb>{_WEEKDAY})(?!\w)"
        rf"|(?P<wd>{_DAY_SHORT})\.?(?=,?\s{_DATE_OR_TIME}))",
    ),
    (
        "months",  # "Jan-Mar", "Jan 2025" (a month before a year, named in full; the year is read after it)
        rf"(?<![\w.])(?:(?P<ma>{_MONTH})\.?\s?[-–]\s?(?P<mb>{_MONTH})\.?(?!\w)"
        rf"|(?P<mc>{_MONTH})\.?(?=\s(?:19|20)\d\d(?!\d)))",
    ),
    (
        "tz",
        r"(?<![\w.])(?P<tzn>GMT|UTC)\s?(?P<tzs>[+\u2212-])\s?(?P<tzh>1[0-4]|0?\d)(?::?(?P<tzm>[0-5]\d))?(?!\w)",
    ),
    ("ussd", r"(?<![\w*#])(?P<keys>[*#][\d*#]*\d[\d*#]*#)"),  # "*123#", "*#06#", "#100*2#"
    ("key", KEYPAD_KEY.pattern),
    ("grade", GRADE.pattern),
    ("approx", rf"(?<![\w~])~(?=\d|{_CUR})"),
    ("at", rf"(?<=\s)@(?=\s?(?:\d|{_CUR}))"),  # "Call me @ 5pm", "12 @ RM2.50"
    ("amp", r"(?<=\s)&(?=\s)|(?<=[A-Z])&(?=[A-Z])"),  # "salt & pepper", "R&D"
    # a spaced "+" or "=" before an amount or a number ("$1,299.99 + 6% SST = $1,377.99")
    ("sum_sign", rf"(?<=[\w%)] )[+=](?= [-{_MINUS}]?(?:\d|(?:{_CUR})\s?\d))"),
    ("copy", r"©(?:\s?(?P<cy>1[89]\d\d|20\d\d)(?:\s?[-–]\s?(?P<cy2>1[89]\d\d|20\d\d))?(?![\d.,]\d|\d))?"),
    ("compare", COMPARISON.pattern),
    ("tag", r"(?<![\w&#])#(?P<tg>[A-Za-z]\w*)(?![\w-])"),
    (
        "hash",
        r"(?:(?<![\w.])(?P<hno>No\.?|no\.)\s?(?=\d)|#\s?)"
        r"(?P<hv>[A-Za-z]{0,4}\d+[A-Za-z]?(?:[-/][A-Za-z]{0,4}\d+[A-Za-z]?)*)(?![\w])",
    ),
    ("mention", r"(?<![\w.@])@(?P<mn>\w(?:[\w.]*\w)?)(?![\w@])"),
    ("version", r"(?<![\w.])(?:v(?P<vv>\d+(?:\.\d+)*)|V(?P<vV>\d+(?:\.\d+)+))(?!\w|\.\d)"),
    ("ke", r"(?<![\w-])(?:[Kk]e)-(?P<kn>\d+)(?![\w])"),
    (
        "mdate",
        rf"(?<![\w])(?P<fm>{_MONTH})\.?\s(?P<fd>[0-3]?\d)(?:st|nd|rd|th)?(?:,?\s(?P<fy>\d{{4}}))?(?![\w:])",
    ),
    (
        "plate",
        rf"(?<![\w-])(?!(?:{_NOT_PLATES})\s)(?P<pl>[ABCDFJKLMNPQRSTVWZ][A-HJ-NP-Z]{{1,2}})\s"
        rf"(?!(?:19|20)\d\d(?!\d))(?P<pd>[1-9]\d{{0,3}})(?![\w%/:]|[.,-]\d|\s?(?:{_alternation(UNITS)})(?![\w/]))",
    ),
    ("code", r"(?<![\w@./#-])[A-Za-z]+[-/]?\d[A-Za-z0-9]*(?:\.\d+)?(?:[-/][A-Za-z0-9]+)*(?![\w@/])"),
    ("hbdate", HB_DATE.pattern),
    (
        "date",
        rf"(?<![\w/.-]){_DATE}",
    ),
    ("ic", r"(?<![\w-])(?:\d{6}-\d{2}-\d{4}|\d{12})(?![\w-])"),
    # an account's or a card's number: three or more groups of digits, eight digits or more in all
    ("groups", r"(?<![\w.-])(?=(?:\d-?){8})\d{2,}(?:-\d{2,}){2,}(?![\w-]|[.,]\d)"),
    (
        "phone",
        r"(?<![\w+])(?:(?:\+\s?)?(?:6[- ]?)?0[- ]?\d{1,2}(?:[- ]?\d){6,8}|1[- ]?[38]00(?:[- ]?\d){6,7}"
        r"|\+\s?\d{1,3}(?:[- ]?\d){6,12}|(?:\+\s?\d{1,3}\s?)?\(\d{1,4}\)\s?\d{3,4}[- ]?\d{3,4})(?!\d)",
    ),
    (
        "ndate",
        rf"(?<![\w.])(?P<nd>[0-3]?\d)(?:st|nd|rd|th)?[\s-](?P<nm>{_MONTH})\.?(?:[\s-](?P<ny>\d{{4}}))?(?![\w])",
    ),
    ("time", TIME.pattern),
    (
        "height",
        r"(?<![\w.'])(?P<ft>[1-9])(?:'\s?|\s?ft\s?)(?P<inch>1[01]|\d)(?:\"|''|\s?in(?:ch|ches)?(?![\w]))",
    ),  # 6'2", "6 ft 2 in"
    (
        "ratio",
        r"(?<![\w.:])(?P<ca>\d+(?:\.\d+)?):(?P<cb>\d+(?:\.\d+)?)(?P<cc>(?::\d+(?:\.\d+)?)*)(?![\w:]|[.,]\d)",
    ),
    (
        "arith",  # "1+1", "2 + 2 = 4", "5 - 3 = 2", "3 × 4 = 12": a minus or a times sign only with "="
        rf"(?<![\w.+\-{_MINUS}/])(?:{_TERM}(?:\s?[-{_MINUS}+×÷]\s?{_TERM})*\s?=\s?[-{_MINUS}]?{_TERM}"
        rf"|{_TERM}(?:\s?[+÷]\s?{_TERM})+)(?![\w%/]|[.,]\d)",
    ),
    (
        "dims",
        rf"(?<![\w.])(?P<xa>{_NUM})\s?[x×]\s?(?P<xb>{_NUM})(?:\s?[x×]\s?(?P<xc>{_NUM}))?"
        rf"(?:\s?(?P<xu>{_alternation(UNITS)})(?![\w/²³]))?",
    ),
    (
        "percent",  # "12.5%", "5-10%", "5.2 pct"
        rf"(?<![\w.])(?P<pv>[-{_MINUS}+]?{_NUM})(?:%?{_DASH}(?P<pv2>{_NUM}))?\s?(?:[%％]|pct\b)",
    ),
    ("dsec", r"(?<![\w.])(?P<sv>\d+\.\d+)\s?s(?![\w/'])"),  # "9.58s": seconds (a whole "30s" is a decade)
    ("video", rf"(?<![\w.])(?P<vr>480|720|1080|1440|2160)p(?![\w])|(?P<vk>[48])K(?=\s(?:{_SCREEN})(?![\w]))"),
    (
        "unit",
        rf"(?<![\w.])(?P<uv>[-{_MINUS}+]?{_NUM})(?:{_DASH}(?P<uv2>{_NUM}))?\s?(?P<uk>{_alternation(UNITS)})"
        rf"(?:\s?/\s?(?P<uper>{_PER}))?(?![\w/²³\u0b80-\u0bff])",
    ),
    ("ordinal", r"(?<![\w.,])(?P<on>\d{1,3}(?:,\d{3})+|\d+)(?:st|nd|rd|th)(?![A-Za-z])"),
    ("ta_ordinal", r"(?<![\w.])(?P<tn>\d+)-?(?P<ts>ஆம்|ஆவது|வது|ம்)"),
    ("decade", r"(?<![\w.])(?P<dec>\d{0,2}\d0)'?s(?![\w])"),
    ("wsec", r"(?<![\w.])(?P<ws>\d+)(?:s|\ss)(?![\w/'\u2019])"),  # "5s", "30 s": seconds ("30s": ``decade``)
    ("hmin", r"(?<![\w.])(?P<hmh>\d+)\s?h\s?(?P<hmm>[0-5]?\d)\s?m(?:in|ins)?(?![\w])"),  # "2h 15m"
    ("kilo", r"(?<![\w.])(?P<kv>\d+(?:\.\d+)?)[kK](?P<kmore>\+)?(?![\w])"),  # "10k", "10k+"
    # "3.4M", "2bn", "1M+" (a whole number of millions only with "bn"/"mil" or "+": "5M" may be a size)
    ("mega", r"(?<![\w.])(?P<gv>\d+\.\d+|\d+(?=bn|mil|[MB]\+))(?P<gs>M|B|bn|mil)(?P<gmore>\+)?(?![\w])"),
    ("qty", r"(?<![\w.,])(?P<qn>\d{1,3})\s?[x×](?=\s[A-Z][a-z])"),  # a receipt's count: "2 x Teh Tarik"
    (
        "qty_after",  # after the item: "Teh Tarik x2", 拉茶x2
        r"(?:(?<=[A-Za-z)\u0b80-\u0bff] )|(?<=[\u4e00-\u9fff])|(?<=[\u4e00-\u9fff] ))x(?P<qa>[1-9]\d?)"
        r"(?![\w/:]|[.,]\d)",
    ),
    ("times", rf"(?<![\w.])(?P<xv>\d+(?:\.\d+)?)(?:x(?![\w])|\s?x(?=\s?(?:{_CUR})\d))"),
    ("outof", r"(?<![\w/.])(?P<oa>\d+\.\d+)/(?P<ob>\d+)(?![\w/]|\.\d)"),
    (
        "mixed",
        r"(?<![\w./-])(?P<fw>\d+)(?:\s(?P<fn>\d+)/(?P<fd>\d+)(?![\w/]|\.\d)|\s?(?P<fv>[¼½¾⅐-⅞]))",
    ),
    ("slash", r"(?<![\w/.])(?P<sa>\d+)/(?P<sb>\d+)(?![\w/]|\.\d)"),
    (
        "money_after",
        rf"(?<![\w.])(?P<tamt>{_NUM})\s?(?P<tcur>{_CODES})(?![A-Za-z])",
    ),  # "100 MYR", "25 USD": a currency code after the amount
    ("or_more", r"(?<![\w.])(?P<om>\d{1,3}(?:,\d{3})+|\d+)\+(?![\w+])"),  # "18+", "5,000+"
    (
        "range",
        rf"(?<![\w.,/-])(?P<ra>{_NUM}){_DASH}(?P<rb>{_NUM})(?:(?={_AMPM}|{SHORT_DAY_PART.pattern})|(?![\w/-]|[.,]\d))",
    ),
    ("code2", r"(?<![\w@./#-])\d+[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)*(?![\w@])"),
    (
        "number",
        rf"(?P<neg>(?<![\w.+{_MINUS}\-日号月年])[-{_MINUS}+](?=\d))?(?P<nv>(?:\d{{1,2}}(?:,\d\d)+,\d{{3}}|\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.\d+)*)",
    ),
    ("zh_dash", r"(?<=[日号月年])[-–~～](?=\d)"),  # 12月1日-12月31日: a range, not a minus
    ("vulgar", r"[¼½¾⅐-⅞]"),
    ("sup", r"[¹²³⁰⁴-⁹]+"),
)

_LETTER_START = (
    "email", "url", "abbr", "money", "days", "tz", "hash", "ke", "mdate", "version", "plate", "qty_after",
    "code", "grade", "months",
)  # fmt: skip
_OTHER_START = tuple(
    name
    for name, _ in _ALTERNATIVES
    if name not in ("abbr", "days", "months", "tz", "ke", "mdate", "version", "plate", "qty_after", "code")
)


def _compile(names: tuple[str, ...]) -> re.Pattern[str]:
    patterns = dict(_ALTERNATIVES)
    return re.compile("|".join(f"(?P<{name}>{patterns[name]})" for name in names), re.ASCII)


def entity_pattern(name: str) -> re.Pattern[str]:
    """One alternative of the alternations alone, its outer group named as there (``say_as`` matches a
    whole ``<say-as>`` text with it and hands the match to the same handler)."""
    return _compile((name,))


# tried only at candidate positions (see ``core``): one for a start on an ASCII letter, one for the rest
LETTER_ENTITY = _compile(_LETTER_START)
OTHER_ENTITY = _compile(_OTHER_START)
# where entities can be: digits, "@" and number symbols, or a web address ("www.", "://", ".com"); two
# patterns, because one alternation of both is scanned several times slower
DIGIT_ANCHOR = re.compile(r"[0-9]+|[@¼½¾⅐-⅞¹²³⁰⁴-⁹]|#(?=[A-Za-z])")
# an area code in brackets before a phone number: "(03) 2161 1234" (``core``)
AREA_CODE = re.compile(r"\(\d{1,4}\)\s?\d{3}")
URL_HINT = re.compile(r"www\.|://|\.(?:com|net|org|gov|edu|my|io|asia|info|biz|co|sg|ai|app)")
# a road number after a road word: "Jalan 7/2", "Jln. PJS 11/15", "Lorong 5/1A", "Jalan SS2/24" (``core``)
ROAD_NUMBER = re.compile(
    r"(?<![\w/])(?:(?P<rl>[A-Za-z]{1,4}) ?)?(?P<rn>\d+[A-Za-z]?(?:/\d+[A-Za-z]?)+)(?![\w/]|\.\d)", re.ASCII
)
ROAD_WORDS = frozenset(
    """
jalan jln jl lorong lrg persiaran psn lebuh lebuhraya lingkaran lengkok lintang solok medan seksyen section
road rd street st avenue
""".split()  # noqa: SIM905
)
# a plate: up to three capitals one space before a number ("JQA 3391"): a candidate start (``core``)
PLATE_WORD = re.compile(r"[A-Z]{2,3}")


def prefix_tree(words: Iterable[str]) -> str:
    """A pattern matching any of ``words``, shared starts factored out ("Sdn", "Sek", "Sg" -> "S(?:dn|ek|g)").

    Written by hand: the regex engine tries the branches of a flat alternation one by one at every
    position that can start one, and the hints are a hundred words; factored, a position costs a few
    character tests (about half the time over the normalizer's corpus)."""
    branches: dict[str, list[str]] = {}
    ends_here = False
    for word in words:
        if word:
            branches.setdefault(word[0], []).append(word[1:])
        else:
            ends_here = True
    parts = [re.escape(first) + prefix_tree(rests) for first, rests in sorted(branches.items())]
    if not parts:
        return ""
    group = "(?:" + "|".join(parts) + ")"
    return group + "?" if ends_here else (parts[0] if len(parts) == 1 else group)


HINT_WORDS = (
    "Sdn",
    "Bhd",
    "Dr",
    "Prof",
    "Mr",
    "En.",
    "Pn.",
    "Tn.",
    "Hj",
    "Jln",
    "Lrg",
    "Tmn",
    "Kpg",
    "Bgn",
    "Bkt",
    "Sg",
    "Bdr",
    "Tg",
    "Lbh",
    "Psn",
    "Kws",
    "St.",
    "Rd",
    "Ave",
    "Blvd",
    "Hwy",
    "Tkt",
    "Sek",
    "W.P.",
    "samb",
    "Kg",
    "e.g.",
    "i.e.",
    "etc.",
    "approx.",
    "incl.",
    "excl.",
    "Approx.",
    "Incl.",
    "Excl.",
    "cth.",
    "dll",
    "dsb",
    "vs",
    "min.",
    "min ",
    "Min.",
    "Min ",
    "max.",
    "max ",
    "Max.",
    "Max ",
    "maks",
    "Maks",
    "mlm",
    "GMT",
    "UTC",
    *WEEKDAYS,
    *sorted({name[:3] for name in MONTHS}),  # a month's name starts so
    "Ext",
    "ext",
    "p.a.",
    "w/",
)
"""Where an abbreviation may start (``LETTER_ENTITY`` decides)."""
ABBREVIATION_HINT = re.compile(prefix_tree(HINT_WORDS))
# a word right before a number (one space) that may start its entity: "RM 500", "No. 12", "September 12"
PREFIX_WORDS = frozenset([*CURRENCIES, *MONTHS, "No", "no", "#"])
# non-ASCII decimal digits (full-width, Tamil, Arabic-Indic...) and circled or subscript numbers
UNICODE_DIGIT = re.compile(r"[^\D0-9]|[①-⑳⑴-⒇⒈-⒛❶-❿➀-➓₀-₉௰-௲]")
