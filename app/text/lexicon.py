"""Pronunciation lexicons: written forms replaced by how they are said, before the text is normalized.

A lexicon is a list of entries ``grapheme -> alias`` (a respelling in the same script: ``Jln.`` ->
``Jalan``, ``MyKad`` -> ``my kad``), read from JSON (``parse_entries``) or from a W3C Pronunciation
Lexicon (PLS) document with ``<alias>`` entries (``parse_pls``; ``<phoneme>`` entries are refused:
the models read letters, not phonemes). Matching (``Pronouncer``):

- **whole words**: a grapheme that starts (ends) with a letter or digit matches only where the text
  has no letter, mark or digit right before (after) it; Han characters count as no letter there, as
  Chinese has no spaces between words ("我的MyKad" matches ``MyKad``, "MyKads" does not). A space in a
  grapheme matches any run of spaces;
- **case**: an entry matches in any case unless it is ``case_sensitive`` (``US`` the country, not
  "us"); the alias is written as given;
- **language**: an entry with a ``language`` (one of en, ms, zh, ta) applies only to text of that
  language (the text's language, detected when it is "auto");
- **precedence**: the longest grapheme at a position wins; among equally long ones, the earlier
  lexicon in the list (the request's, then the voice's, then the server's). A replacement is not
  searched again, and since it goes through the normalizer afterwards, numbers in it are still read.

Written by hand: the entries are indexed by their first word (or first character, for one that
starts with a Han character or a symbol), so a text is scanned once whatever the number of entries;
no maintained library does whole-word, per-entry case and CJK-aware matching.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from app.text.spoken.language import LANGUAGES, detect_language

__all__ = [
    "Lexicon",
    "LexiconEntry",
    "LexiconError",
    "LexiconLimits",
    "Pronouncer",
    "language_code",
    "parse_entries",
    "parse_pls",
]

PLS_NAMESPACE = "{http://www.w3.org/2005/01/pronunciation-lexicon}"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_SPACES = re.compile(r"\s+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LANGUAGE_NAMES = {"cmn": "zh", "zsm": "ms", "msa": "ms", "may": "ms", "eng": "en", "tam": "ta", "zho": "zh"}


class LexiconError(ValueError):
    """A lexicon that cannot be used: the message says which entry and why."""


@dataclass(frozen=True)
class LexiconLimits:
    """The most entries a lexicon may hold and the longest grapheme and alias, in characters."""

    max_entries: int = 5000
    max_grapheme_chars: int = 128
    max_alias_chars: int = 512


@dataclass(frozen=True)
class LexiconEntry:
    """``grapheme`` is said as ``alias``; ``language`` None applies in every language."""

    grapheme: str
    alias: str
    case_sensitive: bool = False
    language: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "grapheme": self.grapheme,
            "alias": self.alias,
            "case_sensitive": self.case_sensitive,
            "language": self.language,
        }


@dataclass(frozen=True)
class Lexicon:
    """A list of entries (the earlier of two with the same grapheme wins inside one lexicon)."""

    entries: tuple[LexiconEntry, ...]


def language_code(tag: str) -> str | None:
    """One of en, ms, zh, ta for a BCP 47 tag ("ms-MY", "zh-Hans", "en"), else None."""
    primary = tag.strip().lower().replace("_", "-").split("-", 1)[0]
    primary = _LANGUAGE_NAMES.get(primary, primary)
    return primary if primary in LANGUAGES else None


def _scope(value: object, where: str) -> str | None:
    if value is None:
        return None
    code = language_code(value) if isinstance(value, str) else None
    if code is None:
        raise LexiconError(f"{where}: language must be one of {', '.join(LANGUAGES)} (or a tag of one)")
    return code


def _entry(
    grapheme: object,
    alias: object,
    case_sensitive: object,
    language: str | None,
    where: str,
    limits: LexiconLimits,
) -> LexiconEntry:
    if not isinstance(grapheme, str) or not isinstance(alias, str):
        raise LexiconError(f"{where}: grapheme and alias must be strings")
    grapheme, alias = _SPACES.sub(" ", grapheme).strip(), _SPACES.sub(" ", alias).strip()
    if not grapheme or not alias:
        raise LexiconError(f"{where}: grapheme and alias must not be empty")
    if len(grapheme) > limits.max_grapheme_chars or len(alias) > limits.max_alias_chars:
        raise LexiconError(
            f"{where}: a grapheme has at most {limits.max_grapheme_chars} characters and an alias "
            f"at most {limits.max_alias_chars}"
        )
    if not isinstance(case_sensitive, bool):
        raise LexiconError(f"{where}: case_sensitive must be true or false")
    return LexiconEntry(grapheme, alias, case_sensitive, language)


def _checked(entries: list[LexiconEntry], limits: LexiconLimits) -> Lexicon:
    if not entries:
        raise LexiconError("a lexicon needs at least one entry")
    if len(entries) > limits.max_entries:
        raise LexiconError(f"a lexicon holds at most {limits.max_entries} entries, got {len(entries)}")
    return Lexicon(tuple(entries))


def parse_entries(
    items: Sequence[Mapping[str, object]],
    language: str | None = None,
    case_sensitive: bool = False,
    limits: LexiconLimits = LexiconLimits(),
) -> Lexicon:
    """A lexicon from JSON entries ``{"grapheme", "alias", "case_sensitive"?, "language"?}``; the
    lexicon's ``language`` and ``case_sensitive`` are the defaults of its entries."""
    default = _scope(language, "language")
    if len(items) > limits.max_entries:
        raise LexiconError(f"a lexicon holds at most {limits.max_entries} entries, got {len(items)}")
    entries = []
    for index, item in enumerate(items):
        where = f"entries[{index}]"
        scope = _scope(item["language"], where) if item.get("language") is not None else default
        case = item.get("case_sensitive", case_sensitive)
        entries.append(_entry(item.get("grapheme"), item.get("alias"), case, scope, where, limits))
    return _checked(entries, limits)


def _local(element: Element) -> str:
    return element.tag.rpartition("}")[2]


def parse_pls(
    document: str, case_sensitive: bool = False, limits: LexiconLimits = LexiconLimits()
) -> Lexicon:
    """A lexicon from a PLS document (hardened parser: no DTD, entities or external references). Each
    ``<lexeme>``'s graphemes take its first ``<alias>``; ``xml:lang`` of ``<lexicon>`` is the language of
    every entry (a tag of none of en, ms, zh, ta: every language)."""
    try:
        root = fromstring(document, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    except ParseError as exc:
        line, column = exc.position
        raise LexiconError(
            f"the PLS document is not well-formed XML at line {line}, column {column + 1}"
        ) from exc
    except DefusedXmlException as exc:
        raise LexiconError("the PLS document may not have a DTD, entities or external references") from exc
    if _local(root) != "lexicon":
        raise LexiconError(f"the PLS root element must be <lexicon>, not <{_local(root)}>")
    language = language_code(root.get(XML_LANG, ""))
    entries: list[LexiconEntry] = []
    for index, lexeme in enumerate(element for element in root if _local(element) == "lexeme"):
        where = f"lexeme {index + 1}"
        graphemes = [child.text or "" for child in lexeme if _local(child) == "grapheme"]
        aliases = [child.text or "" for child in lexeme if _local(child) == "alias"]
        if not graphemes:
            raise LexiconError(f"{where} has no <grapheme>")
        if not aliases:
            raise LexiconError(
                f"{where} ({graphemes[0].strip()!r}) has no <alias>: only respellings are supported, "
                "not <phoneme>"
            )
        for grapheme in graphemes:
            entries.append(_entry(grapheme, aliases[0], case_sensitive, language, where, limits))
            if len(entries) > limits.max_entries:
                raise LexiconError(f"a lexicon holds at most {limits.max_entries} entries")
    return _checked(entries, limits)


def _is_word(char: str) -> bool:
    """A letter, mark or digit that is not a Han or kana character (where a word may not be cut)."""
    return (char.isalnum() or unicodedata.category(char)[0] == "M") and not _CJK.match(char)


def _token_end(text: str, start: int) -> int:
    """The end of the run of word characters at ``start``, or ``start + 1`` when there is none."""
    end = start
    while end < len(text) and _is_word(text[end]):
        end += 1
    return max(end, start + 1)


def _key(text: str, start: int) -> str:
    """The index key at ``start``: the run of word characters there, or the one character."""
    return text[start : _token_end(text, start)].casefold()


@dataclass(frozen=True)
class _Rule:
    entry: LexiconEntry
    pattern: re.Pattern[str]
    rank: int  # precedence: lower wins among equally long graphemes
    bounded_end: bool

    @classmethod
    def of(cls, entry: LexiconEntry, rank: int) -> _Rule:
        body = r"\s+".join(re.escape(word) for word in entry.grapheme.split(" "))
        flags = 0 if entry.case_sensitive else re.IGNORECASE
        return cls(entry, re.compile(body, flags), rank, _is_word(entry.grapheme[-1]))


class Pronouncer:
    """The entries of ``lexicons`` (highest precedence first), indexed for one pass over a text."""

    def __init__(self, lexicons: Iterable[Lexicon]) -> None:
        index: dict[str, list[_Rule]] = {}
        rank = 0
        for lexicon in lexicons:
            for entry in lexicon.entries:
                index.setdefault(_key(entry.grapheme, 0), []).append(_Rule.of(entry, rank))
                rank += 1
        for rules in index.values():
            rules.sort(key=lambda rule: (-len(rule.entry.grapheme), rule.rank))
        self._index = index

    def __bool__(self) -> bool:
        return bool(self._index)

    def apply(self, text: str, language: str = "auto") -> str:
        """``text`` with every matching grapheme replaced by its alias (see the module docstring);
        ``language`` is the text's (en, ms, zh, ta), or "auto" to detect it when an entry needs it."""
        if not self._index:
            return text
        detected: str | None = None if language == "auto" else language
        out: list[str] = []
        pos = start = 0
        while start < len(text):
            if _is_word(text[start]) and start and _is_word(text[start - 1]):
                start += 1  # inside a word: no match starts here
                continue
            end = _token_end(text, start)
            key = text[start:end].casefold()
            for rule in self._index.get(key, ()):
                match = rule.pattern.match(text, start)
                if match is None or (
                    rule.bounded_end and match.end() < len(text) and _is_word(text[match.end()])
                ):
                    continue
                if rule.entry.language is not None:
                    detected = detected or detect_language(text)
                    if rule.entry.language != detected:
                        continue
                out += (text[pos:start], rule.entry.alias)
                pos = end = match.end()
                break
            start = end
        if not out:
            return text
        out.append(text[pos:])
        return "".join(out)
