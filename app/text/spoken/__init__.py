"""The ``spoken`` normalizer: numbers, money, IC and phone numbers, dates, times, units, codes, emails,
URLs and abbreviations written out as words in English, Malay, Mandarin or Tamil (pure Python).

Layout: ``numbers_*`` (number words per language), ``speaker`` and ``lang_*`` (how each language
phrases money, units, times, dates), ``language`` (sentence language and the code-switch neighbour
rule), ``patterns`` (the regular expressions), ``entities`` (one handler per entity),
``abbreviations`` and ``core`` (the left-to-right pass).
"""

from app.text.spoken.core import normalize_spoken
from app.text.spoken.language import detect_language

__all__ = ["detect_language", "normalize_spoken"]
