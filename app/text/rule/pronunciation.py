"""Pronunciation replacements for Malaysian and English terms the verbalizer leaves alone.

A small table, applied word-bounded in one pass (longest match first). Two kinds of entry:

- **company forms** (``Sdn. Bhd.``, ``Bhd``, ``Pte. Ltd.``) are matched case-insensitively, with or
  without their dots: no ordinary word is spelled like them;
- **acronyms** are matched case-sensitively, as written in capitals, so that the ordinary words
  that share their letters ("mara", "atm" in "atmosphere", "kl" in "klinik") are never touched.
  Those read letter by letter become spaced capitals ("KL" -> "K L"); those read as a word
  become lower case ("UMNO" -> "umno") so the TTS model does not spell them.

Short lowercase entries ("ms", "ma", "dr") are deliberately absent: the reference's table turned
"ms" into "miss" and "ma" into "m a" inside ordinary sentences. Titles (Dr., Prof., No.) and
anything with a digit ("5G", "MH370") are the verbalizer's, which reads them in the sentence's
language. The patterns are compiled on first use and reused.
"""

from __future__ import annotations

import re
from functools import cache

__all__ = ["apply_pronunciations"]

# Case-insensitive: (pattern, replacement). Dots are optional; a "." ending the term that also ends
# the sentence is put back (see _replace).
_COMPANY_FORMS: tuple[tuple[str, str], ...] = (
    (r"sdn\.?\s*bhd\.?", "sendirian berhad"),
    (r"bhd\.?", "berhad"),
    (r"pte\.?\s*ltd\.?", "private limited"),
)

# Case-sensitive acronyms read letter by letter.
_SPELLED = (
    *("KL", "KLCC", "KLIA", "JB", "PJ", "DBKL", "LRT", "MRT", "KTM", "ERL", "PDRM", "JPJ", "LHDN"),
    *("KWSP", "EPF", "SST", "GST", "TNB", "PTPTN", "SPM", "STPM", "CCTV", "ATM", "OTP", "UiTM", "USM"),
    *("UKM", "UPM"),
)

# Case-sensitive acronyms read as a word.
_AS_WORD = ("UMNO", "MARA", "PETRONAS", "ASEAN", "PERKESO", "FELDA")

_BEFORE = r"(?<![\w@./])"
_AFTER = r"(?![\w@]|[./]\w)"


@cache
def _patterns() -> tuple[re.Pattern[str], dict[str, str], re.Pattern[str], list[str]]:
    """The case-sensitive alternation with its lookup table, and the case-insensitive one."""
    table = {term: " ".join(term.upper()) for term in _SPELLED}
    table.update({term: term.lower() for term in _AS_WORD})
    terms = sorted(table, key=len, reverse=True)
    exact = re.compile(_BEFORE + "(" + "|".join(map(re.escape, terms)) + ")" + _AFTER)
    groups = "|".join(f"({pattern})" for pattern, _ in _COMPANY_FORMS)
    folded = re.compile(_BEFORE + "(?:" + groups + ")" + _AFTER, re.IGNORECASE)
    return exact, table, folded, [replacement for _, replacement in _COMPANY_FORMS]


def apply_pronunciations(text: str) -> str:
    """Replace the table's terms in ``text``; ordinary words are never changed."""
    exact, table, folded, replacements = _patterns()
    # each alternative is one group, so the group that matched (lastindex) picks its replacement
    text = folded.sub(lambda match: _replace(match, replacements[(match.lastindex or 1) - 1]), text)
    return exact.sub(lambda match: table[match.group(1)], text)


def _replace(match: re.Match[str], replacement: str) -> str:
    """``replacement``, plus the term's final "." when it also ends a sentence."""
    if not match.group().endswith("."):
        return replacement
    rest = match.string[match.end() : match.end() + 64]
    ends_sentence = not rest.strip() or re.match(r"\s+[A-Z\u00c0-\u00de]", rest) is not None
    return replacement + "." if ends_sentence else replacement
