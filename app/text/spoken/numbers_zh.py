"""Mandarin number words (simplified characters), written by hand.

``cn2an`` (maintained) reads Arabic numerals as Chinese, but importing it costs 300-400 ms (its
package ``__init__`` builds converters and loads ``proces``), against the house rule that importing
costs milliseconds; the reading itself is a few lines. The tests check this module against ``cn2an``.

Conventions: 万/亿 grouping with 零 for gaps (一千零五, 一万零五百); 十 not 一十 at the start (十二,
十万); 两 for a leading 2 before 百/千/万/亿 (两百, 两千五百, 两万) and for a bare 2 before a measure word
(两点, 两个); 二 elsewhere (二十, 一千二百); decimals digit by digit after 点; years digit by digit
(二零二六); 负 for negative numbers.
"""

from __future__ import annotations

__all__ = ["DIGITS", "cardinal", "decimal", "digits", "ordinal"]

DIGITS = "零一二三四五六七八九"
_SECTION_UNITS = ("", "万", "亿", "万亿")
_PLACES = ((1000, "千"), (100, "百"), (10, "十"), (1, ""))
_BIG = frozenset("百千万亿")


def _section(n: int) -> str:
    """1..9999 -> 一千零五."""
    out: list[str] = []
    gap = False
    for value, unit in _PLACES:
        digit = n // value % 10
        if digit == 0:
            gap = bool(out)
            continue
        if gap:
            out.append("零")
            gap = False
        out.append(DIGITS[digit] + unit)
    return "".join(out)


def cardinal(n: int) -> str:
    """1250 -> 一千二百五十, 2000 -> 两千, 10005 -> 一万零五, 12 -> 十二."""
    if n < 0:
        return "负" + cardinal(-n)
    if n == 0:
        return DIGITS[0]
    if n >= 10**16:  # beyond 万亿: digit by digit
        return digits(str(n))
    sections: list[int] = []
    while n:
        n, section = divmod(n, 10000)
        sections.append(section)
    out: list[str] = []
    pending_zero = False
    for index in range(len(sections) - 1, -1, -1):
        section = sections[index]
        if section == 0:
            pending_zero = bool(out)
            continue
        if out and (pending_zero or section < 1000):
            out.append("零")
        pending_zero = False
        out.append(_section(section) + _SECTION_UNITS[index])
    text = "".join(out)
    if text.startswith("一十"):
        return text[1:]
    if text[0] == "二" and len(text) > 1 and text[1] in _BIG:
        return "两" + text[1:]
    return text


def ordinal(n: int) -> str:
    """3 -> 第三."""
    return "第" + cardinal(n)


def digits(text: str) -> str:
    """For example "2026" -> 二零二六 (ASCII digits only)."""
    return "".join(DIGITS[ord(c) - 48] for c in text)


def decimal(text: str) -> str:
    """For example "12.5" -> 十二点五; "0.75" -> 零点七五."""
    whole, _, fraction = text.replace(",", "").partition(".")
    spoken = cardinal(int(whole or "0"))
    return f"{spoken}点{digits(fraction)}" if fraction else spoken
