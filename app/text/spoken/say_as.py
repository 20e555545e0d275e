"""SSML ``<say-as interpret-as>``: one text read as one class, by the spoken normalizer's own readers.

Each class is the normalizer's reading of that entity in the span's language: the text is matched
whole against the entity's own pattern (``patterns.entity_pattern``) and handed to the same handler
(``entities.HANDLERS``), or, for classes the normalizer reads by context (digits, cardinals, ordinals),
straight to the speaker's ``digits``, ``number`` and ``ordinal``. What the pattern does not take is
read by the nearest class the speaker has (a telephone number in any layout is its digits, a date is
parsed by its ``format``). ``read_as`` returns None when the text does not fit the class; the caller
reads it as plain text then.

Classes: ``characters``/``spell-out`` (letters one by one, digits as digit words), ``verbatim`` (the
same, and symbols by name), ``digits``, ``cardinal``, ``ordinal``, ``telephone``, ``date`` (``format``
one of dmy, mdy, ymd, ydm, dm, md, d, y; without one, as written), ``time``, ``currency``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from app.text.spoken.core import speaker_for
from app.text.spoken.entities import HANDLERS, SYMBOL_WORDS
from app.text.spoken.patterns import CURRENCIES, MONTHS, entity_pattern
from app.text.spoken.speaker import Speaker

__all__ = ["DATE_FORMATS", "INTERPRET_AS", "read_as"]

_NUMBER = re.compile(r"[-\u2212+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
_ORDINAL = re.compile(r"(?:[Kk]e-?)?(\d+)(?:st|nd|rd|th|\.|-?(?:ஆம்|ஆவது|வது|ம்))?")
_DATE_TOKEN = re.compile(r"\d+|[^\W\d_]+")
_CLOCK = re.compile(r"(\d{1,2})[:.hH]?(\d{2})?")
_TRAILING_CODE = re.compile(r"(.+?)\s*([A-Z]{3}|RM)")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
DATE_FORMATS = ("dmy", "mdy", "ymd", "ydm", "dm", "md", "d", "y")
_MONTH_FIRST = ("mdy", "md")


def _entity(name: str, text: str, sp: Speaker) -> str | None:
    """The normalizer's reading of ``text`` as the entity ``name``, when its pattern takes all of it."""
    match = entity_pattern(name).fullmatch(text)
    if match is None:
        return None
    spoken, end = HANDLERS[name](match, sp, text)
    return spoken if end == len(text) else None


def _characters(sp: Speaker, text: str, symbols: bool) -> str:
    """Letters one by one (as capitals), digits as digit words, Han characters as written; other
    symbols by name when ``symbols`` (verbatim), else left out."""
    parts = []
    for char in text:
        if char.isdigit() and char.isascii():
            parts.append(sp.digits(char))
        elif char.isalpha():
            parts.append(char if _HAN.match(char) else char.upper())
        elif symbols and char in SYMBOL_WORDS:
            parts.append(SYMBOL_WORDS[char])
    return sp.join(parts)


def _digits(sp: Speaker, text: str) -> str | None:
    runs = re.findall(r"\d+", text)
    return sp.join([sp.digits(run) for run in runs]) if runs else None


def _cardinal(sp: Speaker, text: str) -> str | None:
    compact = text.replace(" ", "")
    return sp.number(compact) if _NUMBER.fullmatch(compact) else None


def _ordinal(sp: Speaker, text: str) -> str | None:
    match = _ORDINAL.fullmatch(text.strip())
    return sp.ordinal(int(match[1])) if match else None


def _telephone(sp: Speaker, text: str) -> str | None:
    """As the normalizer reads a phone number; any other layout of digits the same way (its digits,
    "plus" first when it starts with "+")."""
    spoken = _entity("phone", text, sp)
    if spoken is not None:
        return spoken
    if not re.fullmatch(r"\+?[\d\s().-]+", text) or not re.search(r"\d", text):
        return None
    digits = sp.digits("".join(c for c in text if c.isdigit()))
    return sp.join([sp.plus_word, digits]) if text.startswith("+") else digits


def _date(sp: Speaker, text: str, date_format: str | None) -> str | None:
    """Without a format, a date as the normalizer reads it; with one, the day, month and year in that
    order (numbers or month names, any separators)."""
    if date_format is None:
        for name in ("date", "ndate", "mdate", "hbdate"):
            if (spoken := _entity(name, text, sp)) is not None:
                return spoken
        date_format = "dmy"
    tokens = _DATE_TOKEN.findall(text)
    if date_format not in DATE_FORMATS or len(tokens) != len(date_format):
        return None
    values: dict[str, int] = {}
    for key, token in zip(date_format, tokens, strict=True):
        if token.isdigit():
            values[key] = int(token)
        elif key == "m" and token.capitalize() in MONTHS:
            values[key] = MONTHS[token.capitalize()]
        else:
            return None
    day, month, year = values.get("d"), values.get("m"), values.get("y")
    if year is not None and year < 100 and len(tokens[date_format.index("y")]) == 2:
        year += 2000 if year < 50 else 1900
    if (day is not None and not 1 <= day <= 31) or (month is not None and not 1 <= month <= 12):
        return None
    if day is None or month is None:
        if day is not None:
            return sp.day_of_month(day, None, None)
        return sp.year(year) if year is not None else None
    if date_format in _MONTH_FIRST:
        return sp.month_first_date(day, month, year)
    return sp.date(day, month, year)


def _time(sp: Speaker, text: str) -> str | None:
    """As the normalizer reads a clock time; "1430", "14" and "9h30" as "14:30", "14:00", "9:30"."""
    text = text.strip()
    if (spoken := _entity("time", text, sp)) is not None:
        return spoken
    clock = _CLOCK.fullmatch(text)
    if clock is None or int(clock[1]) > 24 or (clock[2] and int(clock[2]) > 59):
        return None
    return _entity("time", f"{int(clock[1])}:{clock[2] or '00'}", sp)


def _currency(sp: Speaker, text: str) -> str | None:
    """As the normalizer reads money; an amount written before its code ("45.30 USD") as after it."""
    text = text.strip()
    if (spoken := _entity("money", text, sp)) is not None:
        return spoken
    trailing = _TRAILING_CODE.fullmatch(text)
    if trailing and trailing[2] in CURRENCIES:
        return _entity("money", f"{trailing[2]}{trailing[1]}", sp)
    return None


_READERS: dict[str, Callable[[Speaker, str, str | None], str | None]] = {
    "characters": lambda sp, text, _: _characters(sp, text, symbols=False),
    "spell-out": lambda sp, text, _: _characters(sp, text, symbols=False),
    "verbatim": lambda sp, text, _: _characters(sp, text, symbols=True),
    "digits": lambda sp, text, _: _digits(sp, text),
    "cardinal": lambda sp, text, _: _cardinal(sp, text),
    "number": lambda sp, text, _: _cardinal(sp, text),
    "ordinal": lambda sp, text, _: _ordinal(sp, text),
    "telephone": lambda sp, text, _: _telephone(sp, text),
    "date": _date,
    "time": lambda sp, text, _: _time(sp, text),
    "currency": lambda sp, text, _: _currency(sp, text),
}
INTERPRET_AS = frozenset(_READERS)
"""The ``interpret-as`` values ``read_as`` knows."""


def read_as(interpret_as: str, text: str, language: str, date_format: str | None = None) -> str | None:
    """``text`` read as the class ``interpret_as`` in ``language`` (one of en, ms, zh, ta); None when the
    class is unknown or the text is not of that class (see the module docstring)."""
    reader = _READERS.get(interpret_as.lower())
    if reader is None or not text.strip():
        return None
    spoken = reader(speaker_for(language), text.strip(), date_format)
    return spoken or None
