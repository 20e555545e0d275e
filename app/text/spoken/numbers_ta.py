"""Tamil number words, written by hand: no maintained Python library reads Tamil numbers.

Conventions: the Indian grouping of standard Tamil (ஆயிரம் 10^3, லட்சம் 10^5, கோடி 10^7); a group that
is followed by more takes its joining form (இருபத்து, நூற்று, ஆயிரத்து, லட்சத்து, கோடியே) and the parts
stay separate words ("ஆயிரத்து இருநூற்று ஐம்பது" for 1250), except that a tens word and a unit
that starts with a vowel are written as one (முப்பத்தேழு, இருபத்தொன்று, இருபத்தோராயிரம்; இருபத்து
மூன்று stays two words); a multiplier merges with ஆயிரம்
(இரண்டாயிரம், மூவாயிரம், ஐயாயிரம், பதினோராயிரம், இருபத்தோராயிரம்) and is ஒரு before லட்சம் and கோடி; zero is
பூஜ்ஜியம்; decimals digit by digit after புள்ளி; negative numbers மைனஸ்; ordinals -ஆம் / -ஆவது
(முதலாம், இரண்டாம், இருபத்தொன்றாம்).
"""

from __future__ import annotations

import re

__all__ = ["DIGITS", "attach", "cardinal", "decimal", "digits", "join_suffix", "ordinal"]

DIGITS = ("பூஜ்ஜியம்", "ஒன்று", "இரண்டு", "மூன்று", "நான்கு", "ஐந்து", "ஆறு", "ஏழு", "எட்டு", "ஒன்பது")
_TEENS = (
    "பத்து", "பதினொன்று", "பன்னிரண்டு", "பதின்மூன்று", "பதினான்கு", "பதினைந்து", "பதினாறு", "பதினேழு",
    "பதினெட்டு", "பத்தொன்பது",
)  # fmt: skip
# index = tens digit: (alone, joining)
_TENS = (
    ("", ""), ("", ""), ("இருபது", "இருபத்து"), ("முப்பது", "முப்பத்து"), ("நாற்பது", "நாற்பத்து"),
    ("ஐம்பது", "ஐம்பத்து"), ("அறுபது", "அறுபத்து"), ("எழுபது", "எழுபத்து"), ("எண்பது", "எண்பத்து"),
    ("தொண்ணூறு", "தொண்ணூற்று"),
)  # fmt: skip
_TENS_JOINING = frozenset(joining for _, joining in _TENS if joining)
# index = hundreds digit: (alone, joining)
_HUNDREDS = (
    ("", ""), ("நூறு", "நூற்று"), ("இருநூறு", "இருநூற்று"), ("முந்நூறு", "முந்நூற்று"),
    ("நானூறு", "நானூற்று"), ("ஐநூறு", "ஐநூற்று"), ("அறுநூறு", "அறுநூற்று"), ("எழுநூறு", "எழுநூற்று"),
    ("எண்ணூறு", "எண்ணூற்று"), ("தொள்ளாயிரம்", "தொள்ளாயிரத்து"),
)  # fmt: skip
_U = "\u0bc1"  # vowel sign u, the ending of most number words
_VIRAMA = "\u0bcd"
# an independent vowel that starts a case suffix -> its vowel sign after a consonant
_DOUBLED = frozenset("டறகப")  # a final hard consonant doubles before the joining vowel: ரிங்கிட்டை
_SHORT_SYLLABLE = re.compile(
    "[\u0b95-\u0bb9][\u0bbf\u0bc1\u0bc6\u0bca]?[\u0b95-\u0bb9]\u0bcd"
)  # சென் -> சென்னு-
_VOWEL_SIGNS = {
    "அ": "",
    "ஆ": "ா",
    "இ": "ி",
    "ஈ": "ீ",
    "உ": "ு",
    "ஊ": "ூ",
    "எ": "ெ",
    "ஏ": "ே",
    "ஐ": "ை",
    "ஒ": "ொ",
    "ஓ": "ோ",
}


def _below_hundred(n: int) -> list[str]:
    if n >= 20:
        alone, joining = _TENS[n // 10]
        return [joining, DIGITS[n % 10]] if n % 10 else [alone]
    if n >= 10:
        return [_TEENS[n - 10]]
    return [DIGITS[n]] if n else []


def _below_thousand(n: int) -> list[str]:
    if n < 100:
        return _below_hundred(n)
    alone, joining = _HUNDREDS[n // 100]
    rest = _below_hundred(n % 100)
    return [joining, *rest] if rest else [alone]


def _thousands(count: int, more: bool) -> list[str]:
    """count (1..99) thousands: ஆயிரம், இரண்டாயிரம், இருபத்து ஓராயிரம் (fused later); joining form when ``more``."""
    ending = "ஆயிரத்து" if more else "ஆயிரம்"
    if count == 1:
        return [ending]
    words = _below_hundred(count)
    last = words[-1]
    if last == DIGITS[1]:
        words[-1] = "ஓரா" + ending[1:]
    elif last == DIGITS[3]:
        words[-1] = "மூவா" + ending[1:]
    elif count == 5:
        words[-1] = "ஐயா" + ending[1:]
    elif last == _TEENS[1]:
        words[-1] = "பதினோரா" + ending[1:]
    else:
        words[-1] = last[:-1] + "ா" + ending[1:]
    return words


def _multiplier(count: int) -> list[str]:
    """The count before லட்சம் or கோடி: ஒன்று becomes ஒரு ("ஒரு லட்சம்", "இருபத்தொரு கோடி")."""
    words = _words(count)
    if words[-1].endswith(("ஒன்று", "ொன்று")):  # இருபத்தொன்று -> இருபத்தொரு
        words[-1] = words[-1][: -len("ன்று")] + "ரு"
    return words


def _fuse(words: list[str]) -> list[str]:
    """Join a tens word to a unit that starts with a vowel, as Tamil writes them: முப்பத்து + ஏழு ->
    முப்பத்தேழு, இருபத்து + ஒன்று -> இருபத்தொன்று, இருபத்து + ஓராயிரம் -> இருபத்தோராயிரம்; a unit that
    starts with a consonant stays a word of its own (இருபத்து மூன்று, முப்பத்து நான்கு)."""
    out: list[str] = []
    for word in words:
        sign = _VOWEL_SIGNS.get(word[:1])
        if out and out[-1] in _TENS_JOINING and sign is not None:
            out[-1] = out[-1][:-1] + sign + word[1:]
        else:
            out.append(word)
    return out


def _words(n: int) -> list[str]:
    crore, n = divmod(n, 10**7)
    lakh, n = divmod(n, 10**5)
    thousand, n = divmod(n, 1000)
    words: list[str] = []
    if crore:
        words += [*_multiplier(crore), "கோடியே" if lakh or thousand or n else "கோடி"]
    if lakh:
        words += [*_multiplier(lakh), "லட்சத்து" if thousand or n else "லட்சம்"]
    if thousand:
        words += _thousands(thousand, more=bool(n))
    return _fuse(words + _below_thousand(n))


def cardinal(n: int) -> str:
    """1250 -> "ஆயிரத்து இருநூற்று ஐம்பது"; 2026 -> "இரண்டாயிரத்து இருபத்தாறு"."""
    if n < 0:
        return "மைனஸ் " + cardinal(-n)
    return " ".join(_words(n)) if n else DIGITS[0]


def attach(word: str, sign: str) -> str:
    """Join a suffix that starts with a vowel sign to a number word: இரண்டு + ாம் -> இரண்டாம்."""
    if word.endswith(_U):
        return word[:-1] + sign
    if word.endswith(_VIRAMA):
        return word[:-1] + sign
    return word + "ய" + sign


def join_suffix(word: str, suffix: str) -> str:
    """A case suffix written glued to digits, joined to the word before it: ஐந்து + க்கு -> ஐந்துக்கு,
    இருபது + இல் -> இருபதில், ஆயிரம் + க்கு -> ஆயிரத்துக்கு, ரிங்கிட் + க்கு -> ரிங்கிட்டுக்கு, ரூபாய் + க்கு -> ரூபாய்க்கு."""
    if suffix.startswith("ல"):  # the spoken short form of இல்: 2023ல் -> இரண்டாயிரத்து இருபத்து மூன்றில்
        suffix = "இ" + suffix
    sign = _VOWEL_SIGNS.get(suffix[:1])
    if word.endswith("ம்"):  # ஆயிரம் -> ஆயிரத்து-
        stem = word[:-2] + "த்த"
        return stem + sign + suffix[1:] if sign is not None else stem + _U + suffix
    if word.endswith("ய்"):  # ரூபாய் + க்கு -> ரூபாய்க்கு, + இல் -> ரூபாயில்
        return word[:-1] + sign + suffix[1:] if sign is not None else word + suffix
    if word.endswith(_VIRAMA):  # a loanword ending in a consonant: ரிங்கிட் -> ரிங்கிட்டு-, டாலர் -> டாலரு-
        doubled = (word[-2] in _DOUBLED and word[-3] != _VIRAMA) or _SHORT_SYLLABLE.fullmatch(word)
        stem = word + word[-2] if doubled else word[:-1]
        if stem.endswith(_VIRAMA):
            stem = stem[:-1]
        return stem + sign + suffix[1:] if sign is not None else stem + _U + suffix
    if sign is not None and word.endswith(_U):
        return word[:-1] + sign + suffix[1:]
    return word + suffix


def ordinal(n: int, suffix: str = "ஆம்") -> str:
    """-ஆம் or -ஆவது ordinals: 1 -> முதலாம், 3 -> மூன்றாம், 21 -> இருபத்தொன்றாம்."""
    sign = "ா" + suffix[1:]
    if n == 1:
        return "முதல" + sign
    head, _, last = cardinal(n).rpartition(" ")
    spoken = attach(last, sign)
    return f"{head} {spoken}" if head else spoken


def digits(text: str) -> str:
    """For example "012" -> "பூஜ்ஜியம் ஒன்று இரண்டு" (ASCII digits only)."""
    return " ".join(DIGITS[ord(c) - 48] for c in text)


def decimal(text: str) -> str:
    """For example "3.5" -> "மூன்று புள்ளி ஐந்து"."""
    whole, _, fraction = text.replace(",", "").partition(".")
    spoken = cardinal(int(whole or "0"))
    return f"{spoken} புள்ளி {digits(fraction)}" if fraction else spoken
