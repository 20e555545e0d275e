"""``rule`` mode: sanitize and clean up; with ``normalize_malaysian``, Malaysian entities and terms.

Entity verbalization (email, URL, phone, IC, money, times, units, percentages, dates, titles) is
delegated to the ``spoken`` verbalizer in the requested or detected language, so there is one
verbalizer to get right; the pronunciation table runs first and only adds what the verbalizer
leaves alone (company forms, acronyms).
"""

from __future__ import annotations

from app.text.rule.cleanup import cleanup
from app.text.rule.pronunciation import apply_pronunciations
from app.text.sanitize import sanitize
from app.text.spoken import normalize_spoken

__all__ = ["clean", "normalize_rule"]


def clean(text: str) -> str:
    """Markdown and HTML stripped, punctuation and symbols tidied: the first step of every mode."""
    return cleanup(sanitize(text))


def normalize_rule(text: str, *, normalize_malaysian: bool = False, language: str = "auto") -> str:
    """The ``rule`` mode: ``clean``, then (``normalize_malaysian``) pronunciations and entities.

    ``language`` is one of ``auto|en|ms|zh|ta`` and only matters with ``normalize_malaysian``.
    """
    text = clean(text)
    if not normalize_malaysian:
        return text
    return normalize_spoken(apply_pronunciations(text), language)
