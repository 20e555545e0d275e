"""Verbalizers: one handler per alternative of ``patterns.LETTER_ENTITY`` and ``OTHER_ENTITY``.

A handler gets the match, the speaker of the span's language and the whole text (for context), and
returns the spoken form and where the consumed text ends (a handler may take more than the match:
the second half of a time range, the "-an" of a Malay decade). Handlers parse what was written; the
speaker phrases it. Written by hand: Malaysian IC and phone conventions, and which context makes a
number a year, a code or a date, belong to no library.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from fractions import Fraction

from app.text.spoken import numbers_ta
from app.text.spoken.abbreviations import SENTENCE_FINAL, expand
from app.text.spoken.lang_ta import TAMIL_MEASURE_WORDS
from app.text.spoken.lang_zh import MEASURE_WORDS
from app.text.spoken.patterns import (
    CURRENCIES,
    CURRENCY_NAME,
    DAY_PARTS,
    DIGIT_CUES,
    GRADE,
    HB_DATE,
    MONTHS,
    PER_UNITS,
    PHONE_CUES,
    RANGE_DASH,
    RANGE_END_DATE,
    RANGE_END_TIME,
    SHORT_DAY_PART,
    UNIT_AFTER,
    UNITS,
    VERSION_CUES,
    WEEKDAYS,
    YEAR_CUES,
    ZH_PHONE_CUES,
    entity_pattern,
)
from app.text.spoken.speaker import Speaker

__all__ = ["HANDLERS", "SYMBOL_WORDS", "road_number"]

Handler = Callable[[re.Match[str], Speaker, str], tuple[str, int]]

_SCALES = {
    "k": "k", "K": "k", "thousand": "k", "ribu": "k", "mil": "m", "million": "m", "mn": "m", "m": "m",
    "M": "m", "juta": "m", "Juta": "m", "j": "m", "J": "m", "bil": "b", "billion": "b", "bilion": "b",
    "bn": "b", "b": "b", "B": "b",
    "மில்லியன்": "m", "பில்லியன்": "b", "crore": "cr", "crores": "cr", "கோடி": "cr", "lakh": "lk",
    "lakhs": "lk", "லட்சம்": "lk", "百万": "m", "千万": "qw", "万": "wan", "亿": "yi",
    "trillion": "t", "trilion": "t", "tn": "t", "டிரில்லியன்": "t", "万亿": "t",
}  # fmt: skip
SYMBOL_WORDS = {
    ".": "dot", "@": "at", "_": "underscore", "-": "dash", "+": "plus", "/": "slash", ":": "colon",
    "?": "question mark", "=": "equals", "&": "and", "%": "percent", "#": "hash", "~": "tilde",
}  # fmt: skip
_DATE_CUES = frozenset((
    "on", "by", "until", "till", "before", "after", "from", "date", "dated", "due", "tarikh", "pada",
    "hingga", "sehingga", "sebelum", "selepas", "mulai", "bermula",
))  # fmt: skip
_ZH_DATE_CUES = ("在", "于", "至", "到", "从", "截止", "日期", "前")
_ZH_WEEKDAY_BEFORE = re.compile(r"(?:周|星期|礼拜)[一二三四五六日天][，,]?\s?$")
# words before a number read digit by digit in Mandarin and Tamil, and how far back they are looked for
_SCRIPT_DIGIT_CUES: dict[str, tuple[tuple[str, ...], int]] = {
    "zh": (("号码", "账号", "编号", "订单", "验证码", "密码", "卡号", "单号", "电话", "邮编", "邮政编码"), 6),
    "ta": (("குறியீடு", "எண்", "கணக்கு"), 24),  # code (a postcode too), number, account
}
_YEAR_CHAIN = 4
_YEAR_BEFORE = re.compile(r"(?<!\d)(?P<year>1\d{3}|20\d\d) (?:to|and|or|through|till|until) $")
_NDATE = entity_pattern("ndate")
_DOTTED_CLOCK = re.compile(r"(1[0-2]|0?[1-9])\.([0-5]\d)")  # "8.30", a clock time in a range
_CLOCK_PART = re.compile(rf"\s?(?P<part>(?i:{'|'.join(sorted(DAY_PARTS, key=len, reverse=True))}))(?!\w)")
_DAY_MONTH = re.compile(r"(?P<dd>0?[1-9]|[12]\d|3[01])/(?P<dm>0?[1-9]|1[0-2])(?![\w/]|\.\d)")
_UNIT = entity_pattern("unit")
_ORDINAL = entity_pattern("ordinal")
_LETTERS_DECIMAL = re.compile(r"([A-Za-z]+)(\d+\.\d+)")
_DAYPART_DASH = re.compile(r"(?: (?P<part>pagi|petang|malam|tengah hari|tengah malam))?\s?[-–]\s?")
_AMPM_AFTER = re.compile(r"\s?([aApP])\.?[mM]\.?(?![A-Za-z])")
_ARITHMETIC_PART = re.compile(r"\d+(?:\.\d+)?|[-\u2212+×÷=]")
_ARITHMETIC_SIGNS = frozenset("-\u2212+×÷=")
_SCORE_CUE = re.compile(
    r"(?i:\b(?:score|scored|scores|rating|rated|rate|marks?|grade|skor|markah|penilaian|nilai)\b)\W*$"
    r"|(?:评分|得分|分数|打分|மதிப்பெண்)\W*$"
)  # a whole number over 5, 10 or 100 after one of these is a score
_SHOPPING_DAY = re.compile(
    r"(?P<day>1[0-2])\.(?P=day)(?![\d.])"
    r"|(?P<low>[1-9])\.(?P=low)(?=\s?(?i:sales?|promo|promosi|jualan|deals?|kempen|campaign)|购物节|大促|விற்பனை)"
)  # a sale day named by its date: "11.11", "12.12", "9.9 sale"
_KEYS = re.compile(r"\d+|[*#]")
_KEYPAD_WORD = re.compile(r"(?i:\b(?:press|tekan|dial|pilih)\b)|按|拨|அழுத்த")
_RUN = re.compile(r"[A-Za-z]+|\d+|[^A-Za-z\d]")
_WORDS = re.compile(r"[A-Za-z]+")
_PREVIOUS_WORD = re.compile(r"(\S?)\s*([A-Za-z]\w*)\s+$")  # the word before a number, and what precedes it
_PERIOD_CODE = re.compile(r"Q[1-4]|H[12]|FY")
_ALNUM_RUN = re.compile(r"[A-Za-z]+|\d+")
_DIGIT_RUN = re.compile(r"\d+")
_SCHEME = re.compile(r"^https?://")
_TOWN = re.compile(r" [A-Z][a-z]")  # after a five-digit postcode: ", 50450 Kuala Lumpur"
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")
# a bare hour before a Malay part of day is a clock time: "2 petang", "10 pagi" ("3 malam" only after a
# time word: it is also "three nights")
_MALAY_CLOCK = re.compile(r" (?P<part>pagi|petang|tengah hari|tengah malam|malam)\b")
_MALAY_TIME_CUES = frozenset(
    ("pada", "sebelum", "selepas", "hingga", "sehingga", "sampai", "dari", "mulai", "lepas", "antara")
)
# a clock time earlier in a sentence (it already took "pukul")
_CLOCK_BEFORE = re.compile(
    r"(?i:pukul)|\d:\d\d|\d\s?[aApP]\.?[mM]\b|\d(?:\.\d\d)? (?:pagi|petang|tengah hari|tengah malam)\b"
)


def _cued(text: str, start: int, cue: re.Pattern[str]) -> bool:
    """Whether ``cue`` (a pattern ending in ``$``: a cue word and what may stand between it and the number)
    matches at the end of the 32 characters before ``start``."""
    return cue.search(text, max(0, start - 32), start) is not None


def _previous_words(text: str, start: int, count: int = 3) -> list[str]:
    """The last ``count`` Latin words before ``start``."""
    return _WORDS.findall(text, max(0, start - 32), start)[-count:]


def _dot_kept(written: str, text: str, end: int) -> str:
    """A "." when the final dot of a consumed "p.m." or "etc." also ended the sentence (the text ends, or a
    capital or a digit starts the next word), else nothing."""
    following = text[end + 1 : end + 2]
    if written.endswith(".") and (
        end == len(text) or (text[end].isspace() and (following.isupper() or following.isdigit()))
    ):
        return "."
    return ""


def _counted(sp: Speaker, value: str, text: str, start: int, end: int) -> str:
    """A number before a measure word takes its counting form: Mandarin 两 (not after 第), Tamil ஒரு."""
    if sp.code == "zh" and text.startswith(MEASURE_WORDS, end) and not text.startswith("第", start - 1):
        return sp.quantity(value)
    if sp.code == "ta" and text.startswith(TAMIL_MEASURE_WORDS, end + 1) and text[end : end + 1] == " ":
        return sp.quantity(value)
    return sp.number(value)


def _spell(sp: Speaker, run: str) -> str:
    """Letters of a code: short runs letter by letter ("M H"), words as written; Mandarin keeps them."""
    if sp.code == "zh" or len(run) > 3:
        return run
    return " ".join(run.upper())


def _code_parts(sp: Speaker, written: str) -> str:
    """MH370 -> "M H three seven zero", A12 -> "A twelve", COVID-19 -> "COVID nineteen", A1B2 one by one; a
    financial year "FY2025" -> "F Y twenty twenty five"."""
    runs = [r for r in _RUN.findall(written) if r.isalnum()]
    simple = len(runs) == 2
    if simple and runs[0] in ("FY", "CY") and runs[1].isdigit() and 1900 <= int(runs[1]) <= 2099:
        return sp.join([_spell(sp, runs[0]), sp.year(int(runs[1]))])
    parts = []
    for run in runs:
        if not run.isdigit():
            parts.append(_spell(sp, run))
        elif simple and len(run) <= 2 and run[0] != "0":
            parts.append(sp.cardinal(int(run)))
        else:
            parts.append(sp.digits(run))
    return sp.join(parts)


def _symbols(sp: Speaker, written: str) -> str:
    """An email or URL: letters as written, digits one by one, symbols as English words."""
    parts = []
    for run in _RUN.findall(written):
        if run.isdigit():
            parts.append(sp.digits(run))
        elif run.isalpha():
            parts.append("w w w" if run.lower() == "www" else run)
        elif run in SYMBOL_WORDS:
            parts.append(SYMBOL_WORDS[run])
    return " ".join(parts)


def _fallback(sp: Speaker, written: str) -> str:
    """Digits of a match that did not parse (an impossible date), read as plain numbers."""
    return _DIGIT_RUN.sub(lambda d: f" {sp.cardinal(int(d.group()))} ", written).strip().replace("  ", " ")


def _email(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    return _symbols(sp, m.group()), m.end()


def _url(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    written = _SCHEME.sub("", m.group()).rstrip("/")
    return _symbols(sp, written), m.end()


def _abbr(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    written = m.group()
    spoken = expand(written, sp.code)
    if written == "St." and not _is_name(_PREVIOUS_WORD.search(text, max(0, m.start() - 32), m.start())):
        saint = text.startswith(" ", m.end()) and text[m.end() + 1 : m.end() + 2].isupper()  # or left
        return ("Saint" if saint and sp.code in ("en", "ms") else written), m.end()
    if spoken != written and written.endswith("."):
        if written.rstrip(".").replace(".", "") in SENTENCE_FINAL:
            spoken += _dot_kept(written, text, m.end())
        elif m.end() == len(text):
            spoken += "."
    return spoken, m.end()


_TIMES_AFTER = re.compile(r"\s?[x×]\s?([1-9]\d{0,3})(?![\d.,:/])")  # "RM921.08 x 60": an instalment
_SAME_NAME = {"块": "元", "圆": "元"}  # a currency's other names that its reading says as the first


def _money(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    currency = CURRENCIES[m["cur"]]
    scale = _SCALES[m["scale"]] if m["scale"] else None
    amount = _grouped(m["amt"], currency)
    spoken = sp.money(amount, currency, scale)
    if m["amt2"]:
        scale2 = _SCALES[m["scale2"]] if m["scale2"] else None
        high = sp.money(_grouped(m["amt2"], currency), currency, scale2)
        if ("." in amount and not scale) or scale != scale2:
            low = spoken
        else:
            low = sp.scaled(amount, scale)[0] if scale else sp.number(amount)
        spoken = sp.range(low, high)
    if m["per"]:
        spoken = sp.per(spoken, PER_UNITS[m["per"]])
    sign = m["msign"] or m["csign"]  # "-RM12.90", "RM-12.90", "+RM35"
    if sign:
        spoken = sp.join([sp.sign_word(sign), spoken])
    end = _past_named_currency(spoken, text, m.end())
    if text.startswith("/-", end):  # "Rs. 1,500/-": the "only" mark
        end += 2
    elif text.startswith("++", end) and sp.code in ("en", "ms"):  # "RM88++": service charge and tax on top
        spoken, end = f"{spoken} plus plus", end + 2
    if times := _TIMES_AFTER.match(text, end):  # "RM921.08 x 60 bulan": an instalment and its count
        return sp.join([spoken, _times_count(sp, times[1])]), times.end()
    return spoken, end


def _times_count(sp: Speaker, count: str) -> str:
    """ "x 60" after an amount or an item: the times word and the count ("times sixty", "darab", 乘)."""
    return sp.join([sp.arithmetic_words["×"], sp.cardinal(int(count))])


def _past_named_currency(spoken: str, text: str, end: int) -> int:
    """Where an amount read as ``spoken`` ends in ``text``: past the currency's own name written after it
    ("RM50 ringgit", "$5 dollars", "¥50块"), which the reading already says, else at ``end``."""
    name = CURRENCY_NAME.match(text, end)
    if name is None:
        return end
    word = name.group().strip()
    word = _SAME_NAME.get(word, word.removesuffix("s") if word.isascii() else word)
    return name.end() if word in spoken.lower() else end


_LONG_DIGITS = re.compile(r"\d{5}")
_ID_TAG = re.compile(r"[A-Z]{1,4}(?!(?:19|20)\d\d$)\d{4,}")  # "#A1234": an order number ("#CNY2026": a tag)
_VERSION_WORDS = frozenset(("version", "versi", "ver"))
_TAG_RUN = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+|[_.]")


def _year_or_number(sp: Speaker, run: str) -> str:
    """Digits after a word or in a tag: a year ("2025"), up to three digits as a number, else one by one."""
    if len(run) == 4 and 1000 <= int(run) <= 2099:
        return sp.year(int(run))
    return sp.cardinal(int(run)) if len(run) <= 3 and run[0] != "0" else sp.digits(run)


def _tag_parts(sp: Speaker, body: str) -> list[str]:
    """The words of a hashtag or handle: "PromoDeepavali2025" -> Promo, Deepavali, a year; "TNBCareline"
    -> T N B, Careline; a year in the sentence's language, up to three digits as a number, else digits."""
    parts = []
    for run in _TAG_RUN.findall(body):
        if run[0].isdigit():
            parts.append(_year_or_number(sp, run))
        elif run in SYMBOL_WORDS:
            parts.append(SYMBOL_WORDS[run])
        else:
            parts.append(_spell(sp, run) if run.isupper() else run)
    return parts


def _tag(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """#PromoDeepavali2025 -> "hashtag Promo Deepavali twenty twenty five" ("hashtag" in every language);
    an order or ticket number ("Order #A12345", "#INV20250012", "订单#A1234": a few capitals and four
    digits or more) is read as a number."""
    previous = _previous_words(text, m.start(), 1)
    cued = previous and previous[0].lower() in DIGIT_CUES
    if cued or _LONG_DIGITS.search(m["tg"]) or _ID_TAG.fullmatch(m["tg"]):
        return _id_parts(sp, m["tg"]), m.end()
    return sp.join(["hashtag", *_tag_parts(sp, m["tg"])]), m.end()


def _mention(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """@TNBCareline -> "at T N B Careline" ("at", as in an email address, in every language)."""
    return sp.join(["at", *_tag_parts(sp, m["mn"])]), m.end()


def _version(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """v4.3 -> "version four point three", v1.12.7 -> "versi satu titik dua belas titik tujuh"; no second
    version word when the text already has one next to it ("v2.0版本", "version v2")."""
    parts = (m["vv"] or m["vV"]).split(".")
    after = text[m.end() : m.end() + 12].lstrip()
    if after.startswith((sp.version_word, "版本", "பதிப்பு")) or _version_context(
        text, m.start(), _VERSION_WORDS
    ):
        return sp.dotted(parts), m.end()
    return sp.version(parts), m.end()


def _plate(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """A vehicle plate, "JQA 3391": letters spelled, digits one by one ("J Q A three three nine one")."""
    return sp.join([_spell(sp, m["pl"]), sp.digits(m["pd"])]), m.end()


def _hbdate(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """Malay "3hb Ogos" (hari bulan): "tiga hari bulan Ogos"; in other languages a date."""
    day = int(m["hd"])
    if not 1 <= day <= 31:
        return _fallback(sp, m.group()), m.end()
    month = MONTHS[m["hm"]] if m["hm"] else None
    spoken, end = sp.day_of_month(day, month, int(m["hy"]) if m["hy"] else None), m.end()
    dash = RANGE_DASH.match(text, end) if not month else None
    second = HB_DATE.match(text, dash.end()) if dash else None
    if second and 1 <= int(second["hd"]) <= 31:  # "10hb-12hb Mac"
        month = MONTHS[second["hm"]] if second["hm"] else None
        last = sp.day_of_month(int(second["hd"]), month, int(second["hy"]) if second["hy"] else None)
        spoken, end = sp.range(spoken, last), second.end()
    return spoken + _dot_kept(text[m.start() : end], text, end), end


def road_number(m: re.Match[str], sp: Speaker) -> str:
    """A road number after a road word (``patterns.ROAD_NUMBER``): "7/2" -> "seven slash two", "SS2/24" ->
    "S S two slash twenty four", "5/1A" -> "five slash one A": each number whole, the slash spoken."""
    parts = [_spell(sp, m["rl"])] if m["rl"] else []
    for index, piece in enumerate(m["rn"].split("/")):
        if index:
            parts.append(sp.slash_word)
        parts += _runs_whole(sp, piece)
    return sp.join(parts)


def _runs_whole(sp: Speaker, written: str) -> list[str]:
    """The letter runs of ``written`` spelled and each number read whole ("5/1A", "B-3-12")."""
    return [sp.whole(run) if run.isdigit() else _spell(sp, run) for run in _ALNUM_RUN.findall(written)]


def _id_parts(sp: Speaker, written: str) -> str:
    """An id after "#" or "No.": letters spelled, numbers up to three digits whole, longer ones one by one."""
    parts = []
    for run in _ALNUM_RUN.findall(written):
        if not run.isdigit():
            parts.append(_spell(sp, run))
        elif run[0] == "0" or len(run) >= 4:
            parts.append(sp.digits(run))
        else:
            parts.append(sp.cardinal(int(run)))
    return sp.number_template.format(n=sp.join(parts))


def _hash(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    spoken = _id_parts(sp, m["hv"])
    if m["hno"] and m["hno"][0] == "N" and sp.code in ("en", "ms"):
        spoken = spoken[0].upper() + spoken[1:]
    return spoken, m.end()


def _ke(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    return sp.ordinal(int(m["kn"])), m.end()


def _mdate(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    day, year = int(m["fd"]), int(m["fy"]) if m["fy"] else None
    if not 1 <= day <= 31:
        return _fallback(sp, m.group()), m.end()
    return sp.month_first_date(day, MONTHS[m["fm"]], year) + _dot_kept(m.group(), text, m.end()), m.end()


_WORD_NUMBER = re.compile(r"([a-z]{3,})-(\d+)")  # a word and a number: "top-10", "mid-2025"
_CODE_RANGE = re.compile(r"([A-Z]{1,2})(\d{1,2})-\1(\d{1,2})")  # "Q1-Q3", "A1-A10"
_UNIT_NUMBER = re.compile(r"[A-Z]{1,2}-\d{1,2}[A-Z]?-\d{1,3}[A-Z]?")  # a block, a floor, a unit: "B-3-12"


def _code(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """A code of letters and digits (``_code_parts``); letters and a decimal ("PM2.5"); a lowercase word, a
    dash and a number, the word kept ("top-10" "top ten", "mid-2025" "mid twenty twenty five"); a range of
    codes ("Q1-Q3" "Q one to Q three"); an address's unit number, block, floor and unit ("B-3-12" "B three
    twelve", "A-12-3A": each number read as one)."""
    decimal = _LETTERS_DECIMAL.fullmatch(m.group())  # "PM2.5": the letters spelled, the number read
    if decimal:
        return sp.join([_spell(sp, decimal[1]), sp.number(decimal[2])]), m.end()
    if word := _WORD_NUMBER.fullmatch(m.group()):
        return sp.join([word[1], _year_or_number(sp, word[2])]), m.end()
    if codes := _CODE_RANGE.fullmatch(m.group()):
        low, high = (_code_parts(sp, codes[1] + part) for part in (codes[2], codes[3]))
        return sp.range(low, high), m.end()
    if _UNIT_NUMBER.fullmatch(m.group()):  # spaced in Mandarin too: 三十二 would be thirty-two
        return " ".join(_runs_whole(sp, m.group())), m.end()
    return _code_parts(sp, m.group()), m.end()


def _ic(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """An IC number, or another number of dashed groups ("1234-5678-9012"): digit by digit, no dashes."""
    return sp.digits(m.group().replace("-", "")), m.end()


def _phone(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    written = m.group()
    spoken = sp.digits("".join(c for c in written if c.isdigit()))
    return (sp.join([sp.plus_word, spoken]) if written[0] == "+" else spoken), m.end()


def _date(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    return _to_date(_date_alone(m, sp, text), sp, text)


def _ndate(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    return _to_date(_ndate_alone(m, sp, text), sp, text)


def _to_date(first: tuple[str, int], sp: Speaker, text: str) -> tuple[str, int]:
    """A date read as ``first`` and the date after a dash if one follows: "1 Jan - 31 Mac"."""
    return _with_range(first, sp, text, _DATES)


def _with_range(
    first: tuple[str, int],
    sp: Speaker,
    text: str,
    reads: tuple[tuple[re.Pattern[str], Handler], ...],
    joins: Callable[[re.Match[str]], bool] = lambda _: True,
) -> tuple[str, int]:
    """``first`` (spoken, end) and, when a dash and a match of one of ``reads`` that ``joins`` follow it,
    the range to that second one, read on its own by its handler (so a third after it is not chained)."""
    dash = RANGE_DASH.match(text, first[1])
    if dash is None:
        return first
    for pattern, alone in reads:
        second = pattern.match(text, dash.end())
        if second and joins(second):
            high, end = alone(second, sp, text)
            return sp.range(first[0], high), end
    return first


def _date_alone(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    if m["d1"]:
        day, month, year = int(m["d1"]), int(m["m1"]), int(m["y1"])
        if len(m["y1"]) == 2:
            year += 2000 if year < 50 else 1900
    else:  # year first: 2026-09-12, 2026/09/12
        day, month, year = int(m["id"]), int(m["im"]), int(m["iy"])
    if not (1 <= day <= 31 and 1 <= month <= 12):
        return _fallback(sp, m.group()), m.end()
    if not m["ith"]:
        return sp.date(day, month, year), m.end()
    clock = sp.time(*_twelve_hour(int(m["ith"]), int(m["itm"]), None))  # ISO 8601: 2024-06-15T10:30:00Z
    zone = m["itz"] or ""
    offset = [sp.sign_word(zone[0]), sp.cardinal(int(zone[1:3]))] if zone[:1] in "+-" and zone else []
    if offset and int(zone[-2:]):
        offset.append(sp.cardinal(int(zone[-2:])))
    return sp.join([sp.date(day, month, year), clock, "UTC" if zone else "", *offset]), m.end()


def _ndate_alone(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    day = int(m["nd"])
    if not 1 <= day <= 31:
        return _fallback(sp, m.group()), m.end()
    spoken = sp.date(day, MONTHS[m["nm"]], int(m["ny"]) if m["ny"] else None)
    return spoken + _dot_kept(m.group(), text, m.end()), m.end()


def _twelve_hour(value: int, minutes: int, period: str | None) -> tuple[int, int, str | None]:
    """A 24-hour clock time said on the 12-hour clock (14:30 -> 2:30 pm, 0:15 -> 12:15 am); others as
    given."""
    if value > 12 or value == 0:
        return (value - 12 if value > 12 else 12), minutes, "pm" if 12 < value < 24 else "am"
    return value, minutes, period


def _clock(m: re.Match[str]) -> tuple[int, int, str | None]:
    """(hour, minute, "am" | "pm" | None) of a ``patterns.TIME`` match."""
    part = _day_part(m)
    if part:
        value = int(m["mh"] or m["bh"])
        half = "am" if part in ("mlm", "malam") and value == 12 else DAY_PARTS[part][1]
        return _twelve_hour(value, int(m["mmin"] or 0), half)
    for hour, minute, period in (
        ("th", "tmin", "tap"),
        ("xh", "xmin", ""),
        ("yh", "ymin", ""),
        ("dh", "dmin", "dap"),
        ("ph", "pmin", ""),
        ("hh", "", "hap"),
    ):
        if m[hour]:
            marker = m[period] if period else None
            minutes = int(m[minute]) if minute else 0
            return _twelve_hour(int(m[hour]), minutes, (marker[0].lower() + "m") if marker else None)
    raise AssertionError("unreachable: TIME matched without an hour")


def _day_part(m: re.Match[str]) -> str | None:
    """The Malay part of the day written after a ``patterns.TIME`` match's clock ("ptg", "pagi"), lowered."""
    part = m["mpart"] or m["mfull"] or m["bpart"] or m["bfull"]
    return part.lower() if part else None


def _spoken_clock(m: re.Match[str], sp: Speaker, text: str) -> str:
    """A ``patterns.TIME`` match said by ``sp``; a Malay sentence keeps the part of the day as written
    ("10:30pg" -> "sepuluh tiga puluh pagi", "6.30 mlm" -> "enam tiga puluh malam"), another language says
    its half of the day ("ten thirty a m")."""
    part = _day_part(m)
    if part and sp.code == "ms":
        hour, minute, _ = _clock(m)
        return sp.join([sp.time(hour, minute, None), DAY_PARTS[part][0]])
    if sp.hour_word and text[m.end() : m.end() + 1 + len(sp.hour_word)].lstrip().startswith(sp.hour_word):
        return sp.time_before_hour_word(*_clock(m))
    return sp.time(*_clock(m))


def _pukul(sp: Speaker, text: str, start: int) -> str:
    """ "pukul " before a Malay clock time, unless "pukul" or "jam" is the word before it, or the sentence
    already has "pukul" or a clock time before it ("pukul sepuluh pagi hingga enam petang")."""
    if sp.code != "ms":
        return ""
    sentence = text[max(_sentence_start(text, start), start - 80) : start]
    previous = _WORDS.findall(sentence[-12:])[-1:]
    if previous and previous[0].lower() in ("pukul", "jam"):
        return ""
    if _CLOCK_BEFORE.search(sentence):
        return ""
    return "pukul "


def _sentence_start(text: str, start: int) -> int:
    """Where the sentence that holds ``text[start]`` starts: after the last ". ", "! " or "? "."""
    found = max(text.rfind(end, 0, start) for end in (". ", "! ", "? "))
    return found + 2 if found >= 0 else 0


# a ratio word before two numbers and a colon: "scale 1:50", "a ratio of 1:10", 比例1:20
_RATIO_CUE = re.compile(r"(?:\b(?i:ratios?|scale|skala|nisbah)\b|比例|比率|விகிதம்)\D{0,8}$")
_CLOCK_PAIR = re.compile(r"(\d{1,2}):(\d\d)")


def _time(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """A clock time, and a second one after a dash; two numbers and a colon after a ratio word are a
    ratio ("scale 1:50" "one to fifty", 比例1:20)."""
    pair = _CLOCK_PAIR.fullmatch(m.group())
    if pair and _cued(text, m.start(), _RATIO_CUE):
        return sp.ratio(pair[1], pair[2]), m.end()
    spoken, end = _spoken_clock(m, sp, text), m.end()
    dash = _DAYPART_DASH.match(text, end)
    second = RANGE_END_TIME.match(text, dash.end()) if dash else None
    if dash and second:  # "9am-5pm", "8:00 pagi - 5:00 petang"
        spoken = sp.join([spoken, dash["part"] or ""])
        spoken, end = sp.range(spoken, _spoken_clock(second, sp, text)), second.end()
    return _pukul(sp, text, m.start()) + spoken + _dot_kept(text[m.start() : end], text, end), end


_GROWTH = re.compile(r"\s?(y/y|q/q|m/m|YoY|QoQ|MoM)(?![\w/])")


def _percent(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "12.5%" -> "twelve point five percent"; a growth rate after it in English and Malay: "5% y/y" ->
    "five percent year on year"."""
    spoken = sp.number(m["pv"])
    if m["pv2"]:
        spoken = sp.range(spoken, sp.number(m["pv2"]))
    spoken = sp.percent(spoken)
    growth = _GROWTH.match(text, m.end())
    if growth and sp.code in ("en", "ms"):
        return sp.join([spoken, expand(growth[1], sp.code)]), growth.end()
    return spoken, m.end()


def _unit(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """An amount with its unit, and a second one of the same unit after a dash: "28°C–33°C"."""
    first = _unit_alone(m, sp, text)
    if m["uper"]:
        return first
    return _with_range(first, sp, text, ((_UNIT, _unit_alone),), lambda second: second["uk"] == m["uk"])


def _money_after(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """An amount and a currency code after it: "100 MYR" -> "one hundred ringgit"."""
    currency = CURRENCIES[m["tcur"]]
    return sp.money(_grouped(m["tamt"], currency), currency), m.end()


def _or_more(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "18+" -> "eighteen plus", "lapan belas ke atas"."""
    return sp.or_more(sp.cardinal(int(m["om"].replace(",", "")))), m.end()


def _unit_alone(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    value = m["uv2"] or m["uv"]
    spoken = sp.quantity(m["uv"]) if not m["uv"].startswith("-") else sp.number(m["uv"])
    if m["uv2"]:
        spoken = sp.range(sp.number(m["uv"]), sp.quantity(m["uv2"]))
    spoken = sp.unit(spoken, value.replace(",", ""), UNITS[m["uk"]])
    if m["uper"]:
        return sp.per(spoken, PER_UNITS[m["uper"]]), m.end()
    return spoken + _dot_kept(m["uk"], text, m.end()), m.end()  # "20 செ.மீ." ending the sentence


def _dims(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """30 x 20 x 10 cm -> "thirty by twenty by ten centimetres"."""
    values = [v for v in (m["xa"], m["xb"], m["xc"]) if v]
    spoken = [sp.number(v) for v in values]
    if m["xu"]:
        spoken[-1] = sp.unit(sp.quantity(values[-1]), values[-1].replace(",", ""), UNITS[m["xu"]])
    return sp.join(
        [spoken[0], *(f"{sp.by_word} {s}" if sp.code != "zh" else sp.by_word + s for s in spoken[1:])]
    ), m.end()


def _ordinal_alone(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    return sp.ordinal(int(m["on"].replace(",", ""))), m.end()


def _ordinal(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "3rd" -> "third"; a range of two: "3rd-4th" -> "third to fourth"."""
    return _with_range(_ordinal_alone(m, sp, text), sp, text, ((_ORDINAL, _ordinal_alone),))


def _ta_ordinal(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    suffix = "ஆவது" if m["ts"].endswith("வது") else "ஆம்"
    return numbers_ta.ordinal(int(m["tn"]), suffix), m.end()


_SECONDS_CUE = re.compile(
    r"(?:\b(?i:wait|waiting|waited|every|after|within|for|in|take|takes|took|taking|last|lasts|lasted|about"
    r"|around|another|only|just|first|next|timeout|delay|retry|countdown|tunggu|menunggu|setiap|selepas"
    r"|dalam|selama|sekitar|hanya|cuma)|等待|等|每|后|内|约|倒计时|超时|காத்திரு\w*)\s?$"
)  # "wait 30s", "tunggu 30s", 等待30s: seconds, not a decade
_DECADE_CONTEXT = re.compile(
    r"\b(?i:born|lahir|grew|raised|era|zaman|music|muzik|lagu|songs?|fashion|fesyen|style|popular|famous"
    r"|hits|decade|dekad|tahun)\b"
)  # "popular in 80s", "lahir 80s": a decade even after a seconds cue
_MANY = {"100": "hundreds", "1000": "thousands"}  # "100s of people"


def _decade(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "the 80s" "the eighties", "1990s"; "wait 30s" "wait thirty seconds" (``_seconds_meant``); "100s of"
    "hundreds of"."""
    written = m["dec"]
    if sp.code == "en" and written in _MANY and text.startswith(" of ", m.end()):
        return _MANY[written], m.end()
    if _seconds_meant(text, m, sp.code):
        return _seconds(sp, written), m.end()
    value = int(written)
    if sp.code == "zh":
        return (sp.digits(written) if len(written) == 4 else sp.cardinal(value)) + "年代", m.end()
    if sp.code == "en":
        spoken = sp.year(value) if len(written) == 4 else sp.cardinal(value)
        return (spoken[:-1] + "ies" if spoken.endswith("y") else spoken + "s"), m.end()
    return sp.cardinal(value) + ("an" if sp.code == "ms" else "கள்"), m.end()


def _seconds_meant(text: str, m: re.Match[str], code: str) -> bool:
    """Whether a whole number of tens and an "s" ("30s") is seconds: three digits (no such decade), or, in
    two, after a seconds cue (in Mandarin and Tamil, which write decades otherwise, also without one),
    unless a word of years or eras comes before it; four digits, "'90s" and "90's" are decades."""
    written, start = m["dec"], m.start()
    if len(written) == 4 or "'" in m.group() or (start and text[start - 1] in "'\u2019"):
        return False
    if len(written) == 3:
        return True
    if _DECADE_CONTEXT.search(text, max(0, start - 32), start):
        return False
    return code in ("zh", "ta") or _cued(text, start, _SECONDS_CUE)


def _seconds(sp: Speaker, written: str) -> str:
    return sp.unit(sp.quantity(written), written, "sec")


def _whole_seconds(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "every 5s", "30 s later": seconds; after a product's name ("iPhone 6s": a word with a capital
    inside, or a capitalised word not starting its sentence) a code, its letter spelled."""
    found = _PREVIOUS_WORD.search(text, max(0, m.start() - 32), m.start())
    if found and (any(c.isupper() for c in found[2][1:]) or _is_name(found)):
        return _code_parts(sp, m.group().replace(" ", "")), m.end()
    return _seconds(sp, m["ws"]), m.end()


def _is_name(found: re.Match[str] | None) -> bool:
    """Whether the word ``_PREVIOUS_WORD`` found is capitalised and does not start its sentence."""
    return found is not None and found[2][0].isupper() and found[1] not in ("", ".", "!", "?")


def _hours_minutes(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "2h 15m" -> "two hours fifteen minutes"."""
    hours, minutes = m["hmh"], m["hmm"]
    return sp.join(
        [sp.unit(sp.quantity(hours), hours, "hr"), sp.unit(sp.quantity(minutes), minutes, "min")]
    ), m.end()


def _kilo(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "10k" -> "ten thousand"; "10k+" -> "ten thousand plus"."""
    spoken = sp.scaled(m["kv"], "k")[0]
    return (sp.or_more(spoken) if m["kmore"] else spoken), m.end()


def _quantity(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """A count before an item, as on a receipt: "2 x Teh Tarik" -> "two Teh Tarik" (the "x" is not said)."""
    return sp.cardinal(int(m["qn"])), m.end()


def _quantity_after(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """A count after an item: "Teh Tarik x2" -> "Teh Tarik times two" (as an instalment's)."""
    return _times_count(sp, m["qa"]), m.end()


def _times(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    return sp.times_template.format(n=sp.quantity(m["xv"])), m.end()


_EXPIRY_CUE = re.compile(
    r"(?:\b(?i:exp|expiry|expires|expiring|expiration|valid|thru|luput|tamat)\b|到期|有效期|காலாவதி)\D{0,16}$"
)  # no digit between the word and the number
_MATCH_RESULT_CUE = re.compile(
    r"(?:\b(?i:score|scores|scored|won|win|wins|lost|beat|beats|defeated|draw|drew|skor|menang|kalah|seri"
    r"|tewas|mengalahkan|keputusan)\b|比分|赢|输|击败|战胜|战平|ஸ்கோர்|வென்ற|தோற்ற)\D{0,20}$"
)
_NOT_SCORE_AFTER = re.compile(r"\s?(?:times|kali|次|முறை)")  # "menang 2-3 kali": a range of times


def _slash(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """a/b: "24/7", "20/20", a split ("50/50", "60/40"), a season ("2024/25"), a date (d/m; after a date
    word or a weekday, or when it cannot be a proper fraction), a card's
    expiry after an expiry word ("exp 08/27" "zero eight twenty seven"), a score ("score: 8/10"), else a
    fraction."""
    a, b = int(m["sa"]), int(m["sb"])
    split = a + b == 100 and a % 5 == b % 5 == 0  # a split: "60/40" "sixty forty"
    if split and sp.code == "zh":
        return sp.ratio(m["sa"], m["sb"]), m.end()  # 六十比四十 (六十四十 would run together)
    if (a, b) in ((24, 7), (20, 20)) or split:  # "twenty four seven", "twenty twenty vision"
        return sp.join([sp.cardinal(a), sp.cardinal(b)]), m.end()
    if len(m["sa"]) == len(m["sb"]) == 2 and 1 <= a <= 12 and _cued(text, m.start(), _EXPIRY_CUE):
        return f"{sp.whole(m['sa'])} {sp.cardinal(b)}", m.end()  # spaced in Mandarin too: month, then year
    if 1900 <= a <= 2099 and (b == a + 1 or (len(m["sb"]) == 2 and b == (a + 1) % 100)):
        return sp.range(sp.year(a), sp.year(b)), m.end()  # a season or fiscal year: 2024/25
    previous = _previous_words(text, m.start(), 1)
    cue = (
        (previous and (previous[0].lower() in _DATE_CUES or previous[0] in WEEKDAYS))  # "Tue 3/12"
        or text[max(0, m.start() - 2) : m.start()].endswith(_ZH_DATE_CUES)
        or _ZH_WEEKDAY_BEFORE.search(text, max(0, m.start() - 5), m.start()) is not None  # 周二3/12
    )
    if cue and a < b and text.startswith("的", m.end()):  # 在2/3的地区: a share of them, 三分之二的
        cue = False
    if 1 <= a <= 31 and 1 <= b <= 12 and (cue or a > b) and not UNIT_AFTER.match(text, m.end()):
        return _with_range((sp.date(a, b, None), m.end()), sp, text, _DAY_MONTH_DATES)  # "24/2 - 27/3/2025"
    if b == 0:
        return _fallback(sp, m.group()), m.end()
    if b in (5, 10, 100) and a <= b and _cued(text, m.start(), _SCORE_CUE):
        return sp.out_of(sp.cardinal(a), sp.cardinal(b)), m.end()  # "score: 8/10" -> "eight out of ten"
    return _fraction_unit(sp.fraction(a, b), "1" if a < b else "2", sp, text, m.end())


def _arith(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """A sum between numbers: "1+1" -> "one plus one", "2 × 3 = 6" -> "two times three equals six"; a
    minus after "=" is the result's sign ("= -3": "equals minus three", Malay "negatif")."""
    parts: list[str] = []
    previous = ""
    for part in _ARITHMETIC_PART.findall(m.group()):
        if part not in _ARITHMETIC_SIGNS:
            parts.append(sp.number(part))
        elif previous == "=":
            parts.append(sp.sign_word(part))
        else:
            parts.append(sp.arithmetic_words[part.replace("\u2212", "-")])
        previous = part
    return sp.join(parts), m.end()


def _dsec(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "9.58s" -> "nine point five eight seconds"."""
    return sp.unit(sp.number(m["sv"]), m["sv"], "sec"), m.end()


def _video(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """A picture's resolution: "1080p" -> "ten eighty p" (digit by digit in Mandarin, a number in Malay and
    Tamil), "4K TV" -> "four K TV"."""
    if m["vk"]:
        return sp.join([sp.cardinal(int(m["vk"])), "K"]), m.end()
    lines = int(m["vr"])
    if sp.code == "en" and lines < 1000:
        spoken = sp.join([sp.cardinal(lines // 100), sp.cardinal(lines % 100)])
    elif sp.code == "en":
        spoken = sp.year(lines)
    else:
        spoken = sp.digits(m["vr"]) if sp.code == "zh" else sp.cardinal(lines)
    return sp.join([spoken, "P" if sp.code == "zh" else "p"]), m.end()


def _ussd(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """A phone service code: "*123#" -> "star one two three hash", "*#06#" -> "star hash zero six hash"."""
    keys = {"*": sp.star_word, "#": sp.hash_word}
    return sp.join([keys.get(key) or sp.digits(key) for key in _KEYS.findall(m["keys"])]), m.end()


def _key(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """A lone "#" or "*" near a keypad word ("Press 1, then # to confirm", "# அழுத்தவும்"): the key's
    name (Mandarin "#号键": 井号键, its 号 written); elsewhere as written."""
    if not _KEYPAD_WORD.search(text, max(0, m.start() - 40), m.end() + 20):
        return m.group(), m.end()
    name = sp.star_word if m.group() == "*" else sp.hash_word
    return (name[:-1] if text.startswith("号", m.end()) and name.endswith("号") else name), m.end()


def _mega(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "3.4M" -> "three point four million", "2bn" -> "two billion", "1M+" -> "one million plus"."""
    spoken = sp.scaled(m["gv"], _SCALES[m["gs"]])[0]
    return (sp.or_more(spoken) if m["gmore"] else spoken), m.end()


_BLOOD_CUES = frozenset(("blood", "darah", "donor", "donors", "penderma", "rh"))
_GRADE_CUES = _BLOOD_CUES | frozenset((
    "grade", "grades", "gred", "graded", "score", "scored", "scores", "got", "get", "gets", "dapat",
    "mendapat", "memperoleh", "markah", "result", "results", "keputusan", "rated", "rating", "type", "group",
    "jenis", "kumpulan",
))  # fmt: skip
_SENTENCE_END = re.compile(r"[.!?]\s|[。！？]")
_BLOOD_CUE_TEXT = re.compile(r"血|இரத்த")
_GRADE_CUE_TEXT = re.compile(r"血|成绩|考了|得了|拿了|等级|இரத்த|மதிப்பெண்|தரம்|கிரேடு")


def _grade(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "A+" -> "A plus", "9A+" -> "nine A plus", a blood group "O+" / "AB-" (or any letter after a blood
    word) -> "O positive". A minus sign is read only after a count, for O and AB, or after a grade or blood
    word ("scored B-", "jenis A-") or another grade: "Section A- Overview" stays. Cues are read in the
    sentence before it (a blood word or a grade anywhere in the 32 characters before, a grade word among
    the last three words)."""
    before = _SENTENCE_END.split(text[max(0, m.start() - 32) : m.start()])[-1]  # this sentence's
    words = [w.lower() for w in _WORDS.findall(before)]
    blood_word = not _BLOOD_CUES.isdisjoint(words) or bool(_BLOOD_CUE_TEXT.search(before))
    blood = m["grl"] in ("O", "AB") or blood_word
    minus = m["grs"] != "+"
    cued = (
        not _GRADE_CUES.isdisjoint(words[-3:])
        or _GRADE_CUE_TEXT.search(before) is not None
        or GRADE.search(before) is not None  # another grade before it: "9A+ and a B-"
    )
    if minus and not (m["grn"] or blood or cued):
        return m.group(), m.end()
    signs = sp.blood_signs if blood else sp.grade_signs
    spoken = sp.join([m["grl"], signs[minus]])
    if m["grn"]:
        spoken = sp.join([sp.cardinal(int(m["grn"])), spoken])
    return spoken, m.end()


def _at(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """A spaced "@" before a time or an amount: "at" (the number is read next); kept where the language
    has no word for it."""
    if not sp.at_word:
        return m.group(), m.end()
    return sp.at_word + ("" if text[m.end() : m.end() + 1].isspace() else sp.word_space), m.end()


def _copyright(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "© 2025" -> "copyright twenty twenty five" ("hak cipta", 版权, பதிப்புரிமை): the years after it are
    years ("© 2020-2025": a range of them); after the word itself ("Copyright © 2025") only the years."""
    years = [sp.year(int(year)) for year in (m["cy"], m["cy2"]) if year]
    spoken = sp.range(*years) if len(years) == 2 else "".join(years)
    said = text[max(0, m.start() - 16) : m.start()].rstrip().lower().endswith(sp.copyright_word.lower())
    if said and not spoken:  # "Copyright © Acme": the sign and its space go
        return "", m.end() + text.startswith(" ", m.end())
    return sp.join([spoken] if said else [sp.copyright_word, spoken]), m.end()


def _sum_sign(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """A spaced "+" or "=" before an amount or a number: plus / tambah / 加 / கூட்டல், equals / sama dengan /
    等于 / சமம்."""
    return sp.arithmetic_words[m.group()], m.end()


def _amp(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "&" between words: "salt & pepper" -> "salt and pepper" ("dan", 和, மற்றும்); between capitals only in
    English and Malay ("R&D" -> "R and D", "R dan D"), where the letters are read as Latin."""
    glued = not text[m.start() - 1].isspace()
    if glued and sp.code not in ("en", "ms"):
        return m.group(), m.end()
    return sp.and_word, m.end()


_APPROXIMATE = re.compile(
    r"(?:\b(?i:about|around|approximately|approx\.?|roughly|circa|nearly|almost|sekitar|kira-kira|kurang"
    r"|anggaran|lingkungan|hampir)|约|大约|大概|将近|சுமார்|ஏறத்தாழ|கிட்டத்தட்ட)\s*$"
)


def _approx(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "~8" -> "about eight" (the number is read next); nothing after a word that already says it
    ("about ~8", "lebih kurang ~RM8", "约~8")."""
    if _cued(text, m.start(), _APPROXIMATE):
        return "", m.end()
    return sp.approx_word + sp.word_space, m.end()


def _compare(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "≥ 18" -> "at least eighteen" (the number is read next); a sign without a word in the language is
    kept."""
    word = sp.comparison_words.get(m.group())
    if word is None:
        return m.group(), m.end()
    spaced = text[m.end() : m.end() + 1].isspace()
    return word + ("" if spaced else sp.word_space), m.end()


def _days(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "Mon-Fri" -> "Monday to Friday"; a day written short before a date or a time: "Fri, 12 Dec"."""
    if m["wd"]:
        return sp.weekdays[WEEKDAYS[m["wd"]]], m.end()
    return sp.range(sp.weekdays[WEEKDAYS[m["wa"]]], sp.weekdays[WEEKDAYS[m["wb"]]]), m.end()


def _months(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "Jan-Mar" -> "January to March" ("Januari hingga Mac", 一月到三月); "Jan 2025": the month's name in
    the sentence's language (the year after it is read as one)."""
    if m["mc"]:
        return sp.months[MONTHS[m["mc"]] - 1], m.end()
    low, high = MONTHS[m["ma"]], MONTHS[m["mb"]]
    if low == high:  # "Mei-Mei": a name
        return m.group(), m.end()
    return sp.range(sp.months[low - 1], sp.months[high - 1]), m.end()


def _tz(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "GMT+8" -> "GMT plus eight", "UTC-5:30" -> "UTC minus five thirty"."""
    minutes = sp.cardinal(int(m["tzm"])) if m["tzm"] and int(m["tzm"]) else ""
    return sp.join([m["tzn"], sp.sign_word(m["tzs"]), sp.cardinal(int(m["tzh"])), minutes]), m.end()


def _zh_dash(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """The dash of a Mandarin date range ("12月1日-12月31日"): the range word."""
    return sp.to_word, m.end()


def _grouped(amount: str, currency: str) -> str:
    """An amount whose thousands are grouped with dots (and cents after a comma), as written in Indonesia,
    in the usual notation: "1.500.000" -> "1,500,000"; "50.000" too for the rupiah, which has no cents
    written with a dot."""
    dots = amount.count(".")
    if dots >= 2 or (currency == "idr" and dots == 1 and len(amount.partition(".")[2]) == 3):
        whole, _, cents = amount.partition(",")
        return whole.replace(".", ",") + ("." + cents if cents else "")
    return amount


def _out_of(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "4.5/5" -> "four point five out of five" (a rating: a decimal is no date nor a fraction's top)."""
    return sp.out_of(sp.number(m["oa"]), sp.cardinal(int(m["ob"]))), m.end()


def _height(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """6'2", "6 ft 2 in" -> "six foot two"."""
    return sp.feet_inches(int(m["ft"]), int(m["inch"])), m.end()


def _mixed(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """ "2 1/2", "2½" -> "two and a half", and a unit after it; a number before a slash that is no proper
    fraction is read alone."""
    if m["fv"]:
        value = _vulgar_value(m["fv"])
        numerator, denominator = value.numerator, value.denominator
    else:
        numerator, denominator = int(m["fn"]), int(m["fd"])
        if not 0 < numerator < denominator:
            return sp.number(m["fw"]), m.end("fw")
    return _fraction_unit(sp.mixed(int(m["fw"]), numerator, denominator), "2", sp, text, m.end())


def _fraction_unit(spoken: str, value: str, sp: Speaker, text: str, end: int) -> tuple[str, int]:
    """A fraction's reading and the unit right after it, if any: "½ tsp" -> "one half teaspoon" (``value``
    "1": a proper fraction takes the singular), "1½ kg" -> "one and a half kilograms" ("2")."""
    unit = UNIT_AFTER.match(text, end)
    if unit is None:
        return spoken, end
    return sp.unit(spoken, value, UNITS[unit["uk"]]) + _dot_kept(unit["uk"], text, unit.end()), unit.end()


def _ratio(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """A colon between numbers that is no clock time: minutes and seconds ("25:30"), else a ratio or a
    score ("16:9", "3:2")."""
    if (
        m["ca"].isdigit()
        and m["cb"].isdigit()
        and len(m["cb"]) == 2
        and int(m["cb"]) < 60
        and int(m["ca"]) < 1000
        and not m["cc"]
    ):
        return sp.duration(int(m["ca"]), int(m["cb"])), m.end()
    return sp.ratio(m["ca"], m["cb"], *m["cc"].split(":")[1:]), m.end()


def _range(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    am_pm = _AMPM_AFTER.match(text, m.end())
    low, high = m["ra"], m["rb"]
    clocks = _DOTTED_CLOCK.fullmatch(low), _DOTTED_CLOCK.fullmatch(high)
    if clocks[0] and clocks[1] and (marker := _CLOCK_PART.match(text, m.end()) or am_pm):
        return _clock_range(clocks[0], clocks[1], marker, sp, text, m.start())  # "8.00-10.00 pg"
    if low == high == "50":  # "a 50-50 chance": fifty fifty
        return sp.join([sp.cardinal(50), sp.cardinal(50)]), m.end()
    if (
        len(low) <= 2 >= len(high)
        and (low + high).isdigit()
        and _cued(text, m.start(), _MATCH_RESULT_CUE)
        and not _NOT_SCORE_AFTER.match(text, m.end())
    ):
        return sp.ratio(low, high), m.end()  # a match's score: "menang 3-2" "tiga berbanding dua", 三比二
    if len(low) == 3 and len(high) == 4 and (low + high).isdigit() and _phone_cue(text, m.start()):
        return sp.join([sp.digits(low), sp.digits(high)]), m.end()  # "call 555-1234": a phone number
    if (low + high).isdigit() and (high[0] == "0" < high or (len(low) >= 5 and int(low) > int(high))):
        # no range ends so: a unit's number ("Suite 3-05": "three zero five") or an order number, digit by
        # digit ("20250115-0042", "20250115-1234")
        first = sp.digits(low) if len(low) >= 5 else sp.cardinal(int(low))
        return sp.join([first, sp.digits(high)]), m.end()
    if am_pm and low.isdigit() and high.isdigit() and 1 <= int(low) <= 12 and 1 <= int(high) <= 12:
        period = am_pm.group(1).lower() + "m"
        end = am_pm.end()
        spoken = sp.range(sp.time(int(low), 0, period), sp.time(int(high), 0, period))
        return _pukul(sp, text, m.start()) + spoken + _dot_kept(text[m.start() : end], text, end), end
    days = _NDATE.match(text, m.start("rb")) if low.isdigit() and 1 <= int(low) <= 31 else None
    if days and int(low) < int(days["nd"]):  # "1-15 Dec": the first to the fifteenth of December
        high, end = _ndate_alone(days, sp, text)
        first = sp.day_of_month(int(low), None, None) if sp.code == "en" else sp.cardinal(int(low))
        return sp.range(first, high), end
    four = (
        low.isdigit()
        and len(low) == 4
        and 1000 <= int(low) <= 2099
        and high.isdigit()
        and len(high) in (2, 4)
    )
    if four and sp.code == "en" and _year_context(text, m.start()):  # "in 1999-2001", "since 1995-97"
        return sp.range(sp.year(int(low)), sp.year(int(high))), m.end()
    if four and sp.code == "zh" and text.startswith("年", m.end()):  # 2025-2026年度
        return sp.range(sp.year(int(low)), sp.year(int(high))), m.end()
    part = SHORT_DAY_PART.match(text, m.end())
    if part and low.isdigit() and high.isdigit() and 1 <= int(low) <= 12 and 1 <= int(high) <= 12:
        word, period = DAY_PARTS[part["part"].lower()]  # "2-4ptg"
        if sp.code == "ms":
            spoken = sp.join([sp.range(sp.cardinal(int(low)), sp.cardinal(int(high))), word])
        else:
            spoken = sp.range(sp.time(int(low), 0, period), sp.time(int(high), 0, period))
        return _pukul(sp, text, m.start()) + spoken, part.end()
    counted = _counted(sp, high, text, m.start(), m.end())
    spoken = sp.range(_counted(sp, low, text, m.start(), m.end()), counted)
    if sp.code == "ms" and high.isdigit() and 1 <= int(high) <= 12 and _MALAY_CLOCK.match(text, m.end()):
        spoken = _pukul(sp, text, m.start()) + spoken  # "2-4 petang"
    return spoken, m.end()


def _clock_range(
    low: re.Match[str], high: re.Match[str], marker: re.Match[str], sp: Speaker, text: str, start: int
) -> tuple[str, int]:
    """Two dotted clock times and the part of the day or am/pm after the second ("8.00-10.00 pg",
    "8.30 - 10.00am"): Malay says the part once after both, another language says its half of the day
    with each, the first's only when it comes no later in that half ("9.00-5.00 ptg": "nine to five p m")."""
    (h1, m1), (h2, m2) = (int(low[1]), int(low[2])), (int(high[1]), int(high[2]))
    if marker.re is _CLOCK_PART:
        word, period = DAY_PARTS[marker["part"].lower()]
    else:
        word, period = "", marker.group(1).lower() + "m"
    if sp.code == "ms":
        spoken = sp.join([sp.range(sp.time(h1, m1, None), sp.time(h2, m2, None)), word])
    else:
        first = period if h1 % 12 <= h2 % 12 else None
        spoken = sp.range(sp.time(h1, m1, first), sp.time(h2, m2, period))
    end = marker.end()
    return _pukul(sp, text, start) + spoken + _dot_kept(text[start:end], text, end), end


def _phone_cue(text: str, start: int) -> bool:
    """A phone word ("call", "hubungi", 电话, 分机...) is right before ``text[start]``, or 转 after a number
    (an extension: "03-2161 1234转123"): a number there is dialled."""
    previous = _previous_words(text, start)
    return (
        any(w.lower() in PHONE_CUES for w in previous[-2:])
        or any(c in text[max(0, start - 4) : start] for c in ZH_PHONE_CUES)
        or (start >= 2 and text[start - 1] == "转" and text[start - 2].isdigit())
    )


_IP_ADDRESS = re.compile(r"(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)")
_SHORT_CODE_CUE = re.compile(
    r"(?:\b(?i:sms|text|txt|whatsapp|reply|balas|hantar|send)\b\D{0,24}\b(?i:to|ke)|短信\D{0,12}(?:发送?到|至))\s*$"
)
_ROOM_CUE = re.compile(r"(?:\b(?i:room|suite|bilik|kamar)(?:\s?(?i:no)\.?)?|房间|房号|அறை)\s?#?$")
_STATUS_CUE = re.compile(r"\b(?i:error|http|status|ralat)(?:\s?(?i:code|kod))?[\s:]{0,2}$")  # "Error 404"


def _label_number(sp: Speaker, value: str) -> str:
    """A room's number or an HTTP status, three or four digits read as a label: in English its hundreds,
    then the rest as a clock's minutes ("305" "three oh five", "1205" "twelve oh five", "404" "four oh
    four", "300" "three hundred"); in the other languages digit by digit, as they say it."""
    if sp.code != "en":
        return sp.digits(value)
    head, tail = int(value[:-2]), int(value[-2:])
    rest = "hundred" if tail == 0 else ("oh " if tail < 10 else "") + sp.cardinal(tail)
    return f"{sp.cardinal(head)} {rest}"


def _number(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    value, start, end = m["nv"], m.start(), m.end()
    if m["neg"]:
        return sp.number(m["neg"] + value), end
    shopping = _SHOPPING_DAY.match(text, start)
    if shopping and shopping.end() == end:
        return sp.shopping_day(int(shopping["day"] or shopping["low"])), end
    if "." in value and _version_context(text, start):
        return sp.dotted(value.split(".")), end
    if _IP_ADDRESS.fullmatch(value):
        return sp.address(value.split(".")), end
    if value.count(".") > 1:
        return sp.dotted(value.split(".")), end
    if not value.isdigit():
        return sp.number(value), end
    if 4 <= len(value) <= 6 and _SHORT_CODE_CUE.search(text, max(0, start - 40), start):
        return sp.digits(value), end  # an SMS short code: "text STOP to 32728"
    if 3 <= len(value) <= 4 and (_cued(text, start, _ROOM_CUE) or text.startswith(("室", "号房"), end)):
        return _label_number(sp, value), end  # "Room 1205", "Bilik 305", 302室
    if len(value) == 3 and 100 <= int(value) <= 599 and _cued(text, start, _STATUS_CUE):
        return _label_number(sp, value), end  # "Error 404", "HTTP 503"
    if sp.code == "ms" and _MALAY_CLOCK.match(text, end) and 1 <= int(value) <= 12:
        clock = _MALAY_CLOCK.match(text, end)
        previous = [word.lower() for word in _previous_words(text, start, 1)]
        if clock and (clock["part"] != "malam" or (previous and previous[0] in _MALAY_TIME_CUES)):
            return _pukul(sp, text, start) + sp.cardinal(int(value)), end
    if (value[0] == "0" and len(value) > 1) or len(value) >= 7:
        return sp.digits(value), end
    if sp.code == "en" and len(value) == 4 and 1000 <= int(value) <= 2099 and _year_context(text, start):
        return sp.year(int(value)), end
    alone_in_brackets = start > 0 and text[start - 1] == "(" and text.startswith(")", end)
    if sp.code == "en" and len(value) == 4 and 1900 <= int(value) <= 2099 and alone_in_brackets:
        return sp.year(int(value)), end  # "(2023)" after a figure or a title
    if len(value) >= 3 and _phone_cue(text, start):
        return sp.digits(value), end
    if len(value) >= 4 and any(w.lower() in DIGIT_CUES for w in _previous_words(text, start, 5)):
        return sp.digits(value), end
    if len(value) == 5 and text.startswith(", ", start - 2) and _TOWN.match(text, end):
        return sp.digits(value), end
    if sp.code == "zh" and len(value) == 4 and text.startswith("年", end):
        return sp.year(int(value)), end
    cues, reach = _SCRIPT_DIGIT_CUES.get(sp.code, ((), 0))
    if len(value) >= 4 and any(cue in text[max(0, start - reach) : start] for cue in cues):
        return sp.digits(value), end
    if sp.code in ("zh", "ta"):
        return _counted(sp, value, text, start, end), end
    if sp.code == "ms" and text.startswith("-an", end):
        return sp.cardinal(int(value)) + "an", end + 3
    return sp.cardinal(int(value)), end


def _version_context(text: str, start: int, cues: frozenset[str] = VERSION_CUES) -> bool:
    """A version word ("version", "versi", 版本, பதிப்பு; or a word of ``cues``) just before ``start``."""
    before = text[max(0, start - 12) : start]
    if before.rstrip(" :：").endswith(("版本", "版本号", "பதிப்பு")):
        return True
    word = _WORDS.findall(before)[-1:]
    return bool(word) and word[0].lower() in cues and before.rstrip(" .")[-len(word[0]) :] == word[0]


def _year_context(text: str, start: int) -> bool:
    """A year cue ("in", "since", a month name) or a quarter ("Q3", "H1", "FY") just before ``start``, or a
    year read so before it and a joining word ("from 2010 to 2020", "in 1998 and 2004"; at most
    ``_YEAR_CHAIN`` years back)."""
    for _ in range(_YEAR_CHAIN):
        token = text[max(0, start - 16) : start].split()[-1:]
        word = token[0].strip(",.;:()") if token else ""
        month = word.replace("–", "-").rpartition("-")[2].rstrip(".")  # "Mar", "Jan-Mar", "Jan.–Mar."
        if word.lower() in YEAR_CUES or month in MONTHS or bool(_PERIOD_CODE.fullmatch(word)):
            return True
        joined = _YEAR_BEFORE.search(text, max(0, start - 24), start)
        if joined is None:
            return False
        start = joined.start("year")
    return False


def _vulgar_value(char: str) -> Fraction:
    """The value of a fraction character: "¾" -> 3/4."""
    return Fraction(unicodedata.numeric(char)).limit_denominator(10)


def _vulgar(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    value = _vulgar_value(m.group())
    return _fraction_unit(sp.fraction(value.numerator, value.denominator), "1", sp, text, m.end())


def _sup(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    return sp.cardinal(int(m.group().translate(_SUPERSCRIPTS))), m.end()


def _day_month_alone(m: re.Match[str], sp: Speaker, text: str) -> tuple[str, int]:
    """A day and a month after a range dash: "24/2-27/3"."""
    return sp.date(int(m["dd"]), int(m["dm"]), None), m.end()


_DATES: tuple[tuple[re.Pattern[str], Handler], ...] = (
    (RANGE_END_DATE, _date_alone),
    (_NDATE, _ndate_alone),
)  # a date after a range dash
_DAY_MONTH_DATES = (*_DATES, (_DAY_MONTH, _day_month_alone))  # after a day and a month: "24/2 - 27/3"

HANDLERS: dict[str, Handler] = {
    "email": _email, "url": _url, "abbr": _abbr, "money": _money, "hash": _hash, "ke": _ke, "mdate": _mdate,
    "code": _code, "ic": _ic, "groups": _ic, "phone": _phone, "date": _date, "ndate": _ndate, "time": _time,
    "dims": _dims,
    "percent": _percent, "unit": _unit, "ordinal": _ordinal, "ta_ordinal": _ta_ordinal, "decade": _decade,
    "wsec": _whole_seconds, "kilo": _kilo, "times": _times, "slash": _slash, "mixed": _mixed, "ratio": _ratio,
    "range": _range, "outof": _out_of, "height": _height, "days": _days, "months": _months, "tz": _tz,
    "ussd": _ussd, "arith": _arith, "dsec": _dsec, "video": _video, "key": _key, "mega": _mega,
    "hmin": _hours_minutes,
    "grade": _grade, "approx": _approx, "at": _at, "amp": _amp, "sum_sign": _sum_sign, "copy": _copyright,
    "qty": _quantity, "qty_after": _quantity_after, "zh_dash": _zh_dash,
    "or_more": _or_more, "money_after": _money_after,
    "compare": _compare, "code2": _code, "number": _number,
    "vulgar": _vulgar, "sup": _sup, "tag": _tag, "mention": _mention, "version": _version, "plate": _plate,
    "hbdate": _hbdate,
}  # fmt: skip
