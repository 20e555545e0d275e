"""``normalize_spoken``: find entities left to right, read each in its language, keep the rest as is.

Speed: one big alternation tried at every position costs ~4 µs a character, so entities are only
tried at candidate positions: each run of digits (and "@", number symbols), the letters or symbols
glued before it ("RM500", "MH370", "ke-3", "ali.88@"), a known word one space before it ("RM 500",
"No. 12", "September 12"), the start of a token that looks like a web address, each abbreviation,
and a letter grade or blood group ("A+", "O-"). The earliest candidate that matches wins, as a
left-to-right search would have it.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right

from app.text.spoken import numbers_ta
from app.text.spoken.entities import HANDLERS, road_number
from app.text.spoken.lang_en import English
from app.text.spoken.lang_ms import Malay
from app.text.spoken.lang_ta import Tamil
from app.text.spoken.lang_zh import Mandarin
from app.text.spoken.language import LANGUAGES, Votes, marker_counts, script_language
from app.text.spoken.patterns import (
    ABBREVIATION_HINT,
    AREA_CODE,
    COMPARISON,
    DIGIT_ANCHOR,
    GRADE_HINT,
    KEYPAD_KEY,
    LETTER_ENTITY,
    MONTH_LANGUAGE,
    OTHER_ENTITY,
    PLATE_WORD,
    PREFIX_WORDS,
    ROAD_NUMBER,
    ROAD_WORDS,
    UNICODE_DIGIT,
    URL_HINT,
)
from app.text.spoken.speaker import SIGNS, Speaker

__all__ = ["normalize_spoken", "speaker_for"]

_SPEAKERS: dict[str, Speaker] = {s.code: s for s in (English(), Malay(), Mandarin(), Tamil())}
_CHINESE_DIGITS = frozenset("〇零一二三四五六七八九两")
_CHINESE_NUMERALS = frozenset("〇零一二三四五六七八九两十百千")
_GLUE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ$€£¥￥₹฿₩#*~+-.\u2212")
_EMAIL_GLUE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")
_NOT_URL = frozenset(" \t\n\r(<\"'[")
_LOOK_BACK = 32
_INSIDE_NUMBER = frozenset(",.:/")
_TAMIL_RUPEE = ("ரூ.", "ரூ")
# a sentence ends at . ! ? before a space, or at Chinese 。！？ (each sentence gets its own language)
_SENTENCE_END = re.compile(r"[.!?]\s+(?=\S)|[。！？](?=\S)")
_NO_SENTENCE_END = frozenset((
    "Dr", "Prof", "Mr", "Mrs", "Ms", "En", "Pn", "Tn", "Hj", "Hjh", "Jln", "Tmn", "Lrg", "Kg", "No", "no",
    "vs", "approx", "St", "Sdn", "Ext", "Tel", "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept",
    "Oct", "Okt", "Nov", "Dec", "Dis", "ext", "tel", "Rs", "Kpg", "Bgn", "Tkt", "Sek", "samb", "incl", "excl",
))  # fmt: skip
_MONTH_GROUP = {"ndate": "nm", "mdate": "fm"}
# entities whose own spelling is Malay: "ke-3"
_OWN = {"ke": "ms"}
_LATIN_TAIL = re.compile(r"[A-Za-z0-9.]+$")
# Tamil letters glued to an entity, or after a hyphen a case suffix ("2023-ல்", "5-க்கு", "RM20-ஐ"; not
# "5-நட்சத்திர", a compound)
_TAMIL_SUFFIX = re.compile(r"[\u0b80-\u0bff]+|-(?=இ|ஈ|ஆ|ஐ|உ|ஓ|ல|க்க)[\u0b80-\u0bff]+")


def speaker_for(language: str) -> Speaker:
    """The phrasing of one of ``LANGUAGES`` (KeyError for any other)."""
    return _SPEAKERS[language]


def _back(text: str, index: int, allowed: frozenset[str]) -> int:
    """The start of the run of ``allowed`` characters that ends at ``index`` (at most 32 back)."""
    limit = max(0, index - _LOOK_BACK)
    while index > limit and text[index - 1] in allowed:
        index -= 1
    return index


def _back_to_space(text: str, index: int) -> int:
    """The start of the web address that contains ``text[index]`` (ASCII, up to a space or bracket)."""
    limit = max(0, index - _LOOK_BACK * 2)
    while index > limit and text[index - 1].isascii() and text[index - 1] not in _NOT_URL:
        index -= 1
    return index


def _candidates(text: str) -> list[int]:
    """Positions where an entity may start, sorted (see the module docstring).

    A run of digits right after a digit and one of ",.:/" ("250" in "1,250") is left out: it is
    part of the entity that starts before it, or read next when that entity stops there.
    """
    found: set[int] = set()
    rupee = "ரூ" in text
    for anchor in DIGIT_ANCHOR.finditer(text):
        start = anchor.start()
        if start >= 2 and text[start - 1] in _INSIDE_NUMBER and text[start - 2].isdigit():
            continue
        found.add(start)
        glued = _back(text, start, _EMAIL_GLUE if anchor.group() == "@" else _GLUE)
        if glued == start >= 2 and text[start - 1] == "/" and text[start - 2].isupper():
            glued = _back(text, start - 1, _GLUE)  # "INV/2025/00123"
        found.add(glued)
        if text[glued] in "~*" and glued < start:  # "~RM50": RM starts an entity too
            found.add(glued + 1)
        near = max(0, glued - 4)
        head = text[near:glued].rstrip(" ") if rupee else ""
        if head.endswith(_TAMIL_RUPEE):  # "ரூ.10,000", "ரூ 500": the rupee written in Tamil
            found.add(near + len(head) - (3 if head.endswith("ரூ.") else 2))
        if glued >= 2 and text[glued - 1] == " ":
            word_start = _back(text, glued - 1, _GLUE)
            word = text[word_start : glued - 1]
            plate = PLATE_WORD.fullmatch(word)  # "JQA 3391", "PJS 11/15"
            if word in PREFIX_WORDS or text[word_start : glued - 2] in PREFIX_WORDS or plate:
                found.add(word_start)
            elif word[:1] in SIGNS and word[1:] in PREFIX_WORDS:  # "-RM 25.40": the sign and the currency
                found.update((word_start, word_start + 1))
    for hint in COMPARISON.finditer(text):
        found.add(hint.start())
    for hint in AREA_CODE.finditer(text):
        found.add(hint.start())
    if "#" in text or "*" in text:
        for hint in KEYPAD_KEY.finditer(text):
            found.add(hint.start())
    for sign in ("&", "©", " + ", " = "):  # "salt & pepper", "R&D" (the entity pattern decides), "© 2025"
        at = text.find(sign)
        while at >= 0:
            found.add(at + (len(sign) > 1))  # a spaced sign: the sign itself
            at = text.find(sign, at + 1)
    if "+" in text or "-" in text or "\u2212" in text:
        for hint in GRADE_HINT.finditer(text):
            found.add(hint.start())
    for hint in URL_HINT.finditer(text):
        found.add(_back_to_space(text, hint.start()))
    for hint in ABBREVIATION_HINT.finditer(text):
        found.add(hint.start())
    return sorted(found)


def _ascii_digits(match: re.Match[str]) -> str:
    """One non-ASCII digit, or a circled or subscript number, as ASCII digits."""
    return str(int(unicodedata.numeric(match.group())))


def _is_latin(char: str) -> bool:
    return char.isascii() and char.isalnum()


def normalize_spoken(text: str, language: str = "auto") -> str:
    """``text`` with numbers, money, dates, times, units, codes, emails, URLs and abbreviations in words.

    ``language`` is "auto" (detect per sentence; in Malay/English text each entity takes the language
    of its neighbouring words) or one of "en", "ms", "zh", "ta" (every entity in that language).
    Text with nothing to read comes back unchanged; the result has no digits and is a fixed point: a
    changed text is passed again until it no longer changes (at most three more passes; for ordinary
    text the second pass finds no candidate and costs a few microseconds), so that odd input, such as
    a web address glued to digits, cannot change on a second call.
    """
    if language != "auto" and language not in LANGUAGES:
        raise ValueError(f"language must be 'auto' or one of {', '.join(LANGUAGES)}, not {language!r}")
    if UNICODE_DIGIT.search(text):
        text = UNICODE_DIGIT.sub(_ascii_digits, text)
    out = _one_pass(text, language)
    for _ in range(3):
        if out == text:
            break
        text, out = out, _one_pass(out, language)
    return out


def _one_pass(text: str, language: str) -> str:
    """One left-to-right pass over ASCII-digit text; ``text`` itself (same object) when nothing was read."""
    candidates = _candidates(text)
    if not candidates:
        return text
    sentences = _Sentences(text, language)
    out: list[str] = []
    pos = 0
    for candidate in candidates:
        start = candidate
        while start >= pos:
            read = _read_at(text, start, sentences)
            if read is None:
                break
            spoken, end = read
            out += (text[pos:start], spoken)
            pos = start = end
            # an entity that stopped inside a number ("9297" of "9297,457"): the rest is read next
            if text[end : end + 1] in _INSIDE_NUMBER and text[end + 1 : end + 2].isdigit():
                start = end + 1
            elif not text[end : end + 1].isdigit():
                break
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


class _Sentences:
    """The language of the sentence around a position of ``text``, worked out when first asked for: most
    candidates are no entity, and a text whose candidates all fail needs no sentence split at all."""

    def __init__(self, text: str, language: str) -> None:
        self._text, self._language = text, language
        self._starts: list[int] | None = None
        self._contexts: dict[int, tuple[str, Votes | None]] = {}

    def context_at(self, position: int) -> tuple[str, Votes | None]:
        """(the sentence's language, its code-switching votes or None) for the sentence at ``position``."""
        text = self._text
        if self._starts is None:
            self._starts = [0] if self._language != "auto" else _sentence_starts(text)
        starts = self._starts
        index = bisect_right(starts, position) - 1
        if index not in self._contexts:
            end = starts[index + 1] if index + 1 < len(starts) else len(text)
            self._contexts[index] = _context(text[starts[index] : end], text, self._language)
        return self._contexts[index]


def _sentence_starts(text: str) -> list[int]:
    """Where the sentences of ``text`` start; the dot of "Dr.", "No.", "p.m." or an initial ends none."""
    starts = [0]
    for end in _SENTENCE_END.finditer(text):
        dot = end.start()
        if text[dot] == ".":
            tail = _LATIN_TAIL.search(text, max(0, dot - 16), dot)
            word = tail.group() if tail and tail.end() == dot else text[text.rfind(" ", 0, dot) + 1 : dot]
            if len(word) <= 1 or "." in word or word in _NO_SENTENCE_END:
                continue
        starts.append(end.end())
    return starts


def _context(sentence: str, text: str, language: str) -> tuple[str, Votes | None]:
    """The language of one sentence and, when it mixes Malay and English, its per-entity votes."""
    if language != "auto":
        return language, None
    if script := script_language(sentence):
        return script, None
    ms, en = marker_counts(sentence)
    detected = "ms" if ms > en else "en"
    return detected, Votes(text, detected) if ms and en else None  # both languages: code-switching


def _after_road_word(text: str, start: int) -> bool:
    """A road word ("Jalan", "Jln.", "Lorong") before ``start``, maybe with up to two names or codes between
    ("Jln. PJS 11/15", "Jalan Setia Indah U13/22")."""
    for token in reversed(text[max(0, start - 40) : start].split()[-3:]):
        latin = _LATIN_TAIL.search(token.rstrip(".,"))
        word = latin.group() if latin else ""
        if word.lower() in ROAD_WORDS:
            return True
        if not word[:1].isupper() or len(word) != len(token.rstrip(".,")):
            return False
    return False


def _read_at(text: str, start: int, sentences: _Sentences) -> tuple[str, int] | None:
    """The spoken form of the entity that starts at ``start`` and where it ends, or None if none does."""
    char = text[start]
    road = ROAD_NUMBER.match(text, start) if char.isascii() and char.isalnum() else None
    if road and _after_road_word(text, start):  # in the sentence's language: the road word is a name
        sentence, votes = sentences.context_at(start)
        speaker = _SPEAKERS[votes.sentence_language if votes else sentence]
        return _spaced(text, start, road.end(), road_number(road, speaker))
    match = (LETTER_ENTITY if char.isascii() and char.isalpha() else OTHER_ENTITY).match(text, start)
    if match is None:
        return None
    kind = match.lastgroup or ""
    sentence, votes = sentences.context_at(start)
    if votes and kind == "hbdate":  # "3hb" is Malay however the words around it vote
        speaker = _SPEAKERS["ms"]
    elif votes:
        own = MONTH_LANGUAGE.get(match[_MONTH_GROUP[kind]]) if kind in _MONTH_GROUP else _OWN.get(kind)
        speaker = _SPEAKERS[votes.language(start, match.end(), kind in ("number", "range"), own)]
    else:
        speaker = _SPEAKERS[sentence]
    spoken, end = HANDLERS[kind](match, speaker, text)
    if speaker.code == "ta" and spoken and (suffix := _TAMIL_SUFFIX.match(text, end)):
        head, _, last = spoken.rpartition(" ")
        spoken = (head + " " if head else "") + numbers_ta.join_suffix(last, suffix.group().lstrip("-"))
        end = suffix.end()
    return _spaced(text, start, end, spoken)


def _spaced(text: str, start: int, end: int, spoken: str) -> tuple[str, int]:
    """``spoken`` with a space where it would touch a Latin letter or digit of the text around it, or
    where a Chinese digit before it would run into its own (周二 and 十二月三日: 周二 十二月三日)."""
    before = text[start - 1] if spoken and start > 0 else ""
    if (_is_latin(before) and _is_latin(spoken[0])) or (
        before in _CHINESE_DIGITS and spoken[0] in _CHINESE_NUMERALS
    ):
        spoken = " " + spoken
    if spoken and end < len(text) and _is_latin(text[end]) and _is_latin(spoken[-1]):
        spoken += " "
    return spoken, end
