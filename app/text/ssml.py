"""The SSML subset: an input whose root is ``<speak>``, parsed safely into a flat list of pieces.

Parsing uses defusedxml's hardened expat parser: a DTD (and so any entity declaration or external
reference) is refused outright, so entity expansion (billion laughs) and external entities cannot
happen. The tree is built by our own target, which stops the parse as soon as a cap is passed:
characters (checked first), nesting depth, elements, breaks and the total break time; so a hostile
document costs no more than a plain text of the same size. A malformed document is a 400 that says
the line and column.

Elements (``flatten``): ``<break time strength>`` is a ``Pause``; ``<say-as interpret-as format>``,
``<sub alias>`` are pieces whose reading is fixed (not normalized, no lexicon); ``<lang xml:lang>``
(and ``xml:lang`` on ``<speak>``, ``<p>``, ``<s>``) sets the language of its content; ``<p>``, ``<s>`` end
a sentence before and after them (``SentenceEnd``); ``<prosody rate>`` sets the speaking rate of its
content (a multiple of the request's, the innermost one applies). Any other element, or attribute of
these, is read as its text content and named in ``Document.ignored``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from xml.etree.ElementTree import ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from app.core.errors import InvalidRequest
from app.text.lexicon import XML_LANG, language_code
from app.text.spoken.say_as import INTERPRET_AS

__all__ = ["Document", "Pause", "Piece", "SentenceEnd", "SsmlLimits", "is_ssml", "parse_ssml"]

_START = re.compile(r"\A[\s\ufeff]*<(?:\?xml|!doctype|speak[\s>/])", re.IGNORECASE)
_TIME = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*")
_PERCENT = re.compile(r"\s*([+-]?)(\d+(?:\.\d+)?)\s*%\s*")
_NUMBER = re.compile(r"\s*(\d+(?:\.\d+)?)\s*")
STRENGTH_MS = {"none": 0, "x-weak": 100, "weak": 250, "medium": 500, "strong": 750, "x-strong": 1000}
RATE_WORDS = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
_ATTRIBUTES = {
    "speak": {"version", "lang", "base"},
    "break": {"time", "strength"},
    "say-as": {"interpret-as", "format", "detail"},
    "sub": {"alias"},
    "lang": {"lang"},
    "p": {"lang"},
    "s": {"lang"},
    "prosody": {"rate"},
}


def is_ssml(text: str) -> bool:
    """True for an input that is meant as XML: it starts with ``<speak``, ``<?xml`` or ``<!DOCTYPE``."""
    return _START.match(text) is not None


@dataclass(frozen=True)
class SsmlLimits:
    """Caps on one document: characters of markup and text, nesting, elements, breaks, break time."""

    max_chars: int = 16384
    max_depth: int = 32
    max_elements: int = 1024
    max_breaks: int = 100
    max_break_ms: int = 60_000


@dataclass(frozen=True)
class Piece:
    """Text in one language at one rate. ``say_as`` (interpret-as, format) reads it as a class;
    ``fixed`` marks text said as written (a ``<sub>`` alias). ``block`` numbers the sentence block."""

    text: str
    language: str
    rate: float
    block: int
    say_as: tuple[str, str | None] | None = None
    fixed: bool = False


@dataclass(frozen=True)
class Pause:
    """A break: ``ms`` milliseconds of silence."""

    ms: int


@dataclass(frozen=True)
class SentenceEnd:
    """The end of a ``<p>`` or ``<s>``, or the start of one: a sentence ends here."""


Item = Piece | Pause | SentenceEnd


@dataclass
class Document:
    """A parsed ``<speak>`` document as pieces in reading order, and what was not understood."""

    items: list[Item] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


@dataclass
class _Node:
    tag: str
    attributes: dict[str, str]
    children: list[_Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(child if isinstance(child, str) else child.text() for child in self.children)


def _local(name: str) -> str:
    """A tag or attribute without its namespace ("xml:lang" is "lang")."""
    return name.rpartition("}")[2]


class _Builder:
    """The parser's target: builds ``_Node``s, refusing what passes the caps as it goes."""

    def __init__(self, limits: SsmlLimits, error: Callable[[str], InvalidRequest]) -> None:
        self.limits = limits
        self.error = error
        self.stack: list[_Node] = []
        self.root: _Node | None = None
        self.elements = 0
        self.breaks = 0

    def start(self, tag: str, attributes: dict[str, str]) -> None:
        self.elements += 1
        if len(self.stack) >= self.limits.max_depth:
            raise self.error(f"SSML nests deeper than {self.limits.max_depth} elements")
        if self.elements > self.limits.max_elements:
            raise self.error(f"SSML has more than {self.limits.max_elements} elements")
        node = _Node(
            _local(tag), {(_local(k) if k != XML_LANG else "lang"): v for k, v in attributes.items()}
        )
        if node.tag == "break":
            self.breaks += 1
            if self.breaks > self.limits.max_breaks:
                raise self.error(f"SSML has more than {self.limits.max_breaks} breaks")
        if self.stack:
            self.stack[-1].children.append(node)
        elif self.root is None:
            self.root = node
        self.stack.append(node)

    def end(self, tag: str) -> None:
        self.stack.pop()

    def data(self, text: str) -> None:
        if self.stack:
            self.stack[-1].children.append(text)

    def close(self) -> None:
        return None


def parse_ssml(text: str, limits: SsmlLimits, language: str = "auto", param: str = "input") -> Document:
    """The pieces of an SSML document (see the module docstring); ``language`` is the request's ("auto"
    lets ``<speak xml:lang>`` decide). InvalidRequest (400, code ``invalid_ssml``) for a document that is
    malformed, passes a cap, or whose root is not ``<speak>``."""

    def error(message: str) -> InvalidRequest:
        return InvalidRequest(message, param=param, code="invalid_ssml")

    if len(text) > limits.max_chars:
        raise error(f"SSML input is longer than {limits.max_chars} characters")
    builder = _Builder(limits, error)
    parser = DefusedXMLParser(target=builder, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    try:
        parser.feed(text.lstrip("\ufeff"))
        parser.close()
    except ParseError as exc:
        line, column = exc.position
        raise error(
            f"SSML is not well-formed XML: {_reason(exc)} at line {line}, column {column + 1}"
        ) from None
    except DefusedXmlException:
        raise error("SSML may not contain a DTD, entity declarations or external references") from None
    root = builder.root
    if root is None or root.tag != "speak":
        raise error(f"the SSML root element must be <speak>, not <{root.tag if root else ''}>")
    flat = _Flattener(limits, error)
    start = language_code(root.attributes.get("lang", "")) if language == "auto" else None
    flat.walk(root, start or language, 1.0)
    return flat.document


def _reason(exc: ParseError) -> str:
    """Expat's message without its own position ("mismatched tag: line 1, column 8")."""
    return str(exc).split(":", 1)[0]


class _Flattener:
    def __init__(self, limits: SsmlLimits, error: Callable[[str], InvalidRequest]) -> None:
        self.limits = limits
        self.fail = error
        self.document = Document()
        self.block = 0
        self.break_ms = 0

    def ignore(self, what: str) -> None:
        if what not in self.document.ignored:
            self.document.ignored.append(what)

    def walk(self, node: _Node, language: str, rate: float) -> None:
        tag = node.tag
        for name in node.attributes:
            if tag in _ATTRIBUTES and name not in _ATTRIBUTES[tag]:
                self.ignore(f"{tag} {name}")
        if tag not in _ATTRIBUTES:
            self.ignore(tag)
        if "lang" in node.attributes and tag in ("speak", "lang", "p", "s"):
            code = language_code(node.attributes["lang"])
            if code is None:
                self.ignore(f"{tag} xml:lang={node.attributes['lang']}")
            elif tag != "speak":
                language = code
        if tag == "break":
            self.pause(node)
            return
        if tag == "say-as":
            self.say_as(node, language, rate)
            return
        if tag == "sub" and "alias" in node.attributes:
            self.piece(node.attributes["alias"], language, rate, fixed=True)
            return
        if tag == "prosody" and "rate" in node.attributes:
            rate = self.rate(node.attributes["rate"])
        block = tag in ("p", "s")
        if block:
            self.sentence_end()
        for child in node.children:
            if isinstance(child, str):
                self.piece(child, language, rate)
            else:
                self.walk(child, language, rate)
        if block:
            self.sentence_end()

    def piece(self, text: str, language: str, rate: float, fixed: bool = False) -> None:
        if text:
            self.document.items.append(Piece(text, language, rate, self.block, fixed=fixed))

    def sentence_end(self) -> None:
        items = self.document.items
        if items and not isinstance(items[-1], SentenceEnd):
            items.append(SentenceEnd())
        self.block += 1

    def say_as(self, node: _Node, language: str, rate: float) -> None:
        kind = node.attributes.get("interpret-as", "").strip().lower()
        if kind not in INTERPRET_AS:
            self.ignore(f"say-as interpret-as={kind}" if kind else "say-as")
            self.piece(node.text(), language, rate)
            return
        date_format = node.attributes.get("format", "").strip().lower() or None
        text = node.text()
        if text.strip():
            self.document.items.append(Piece(text, language, rate, self.block, say_as=(kind, date_format)))

    def pause(self, node: _Node) -> None:
        time, strength = node.attributes.get("time"), node.attributes.get("strength")
        if time is not None:
            match = _TIME.fullmatch(time)
            if match is None:
                raise self.fail(f"break time must be like 700ms or 1.5s, got {time[:32]!r}")
            ms = round(float(match[1]) * (1 if match[2] == "ms" else 1000))
        elif strength is not None:
            if strength.strip() not in STRENGTH_MS:
                raise self.fail(
                    f"break strength must be one of {', '.join(STRENGTH_MS)}, got {strength[:32]!r}"
                )
            ms = STRENGTH_MS[strength.strip()]
        else:
            ms = STRENGTH_MS["medium"]
        self.break_ms += ms
        if self.break_ms > self.limits.max_break_ms:
            raise self.fail(f"SSML breaks add up to more than {self.limits.max_break_ms / 1000:g} s")
        if ms:
            self.document.items.append(Pause(ms))

    def rate(self, value: str) -> float:
        """A ``<prosody rate>``: a word (x-slow .. x-fast), a percentage ("80%", "+20%"), or a multiple."""
        word = value.strip().lower()
        if word in RATE_WORDS:
            return RATE_WORDS[word]
        percent = _PERCENT.fullmatch(value)
        if percent:
            amount = float(percent[2]) / 100
            rate = 1 + amount if percent[1] == "+" else 1 - amount if percent[1] == "-" else amount
        elif number := _NUMBER.fullmatch(value):
            rate = float(number[1])
        else:
            raise self.fail(
                f"prosody rate must be x-slow .. x-fast, a percentage or a number, got {value[:32]!r}"
            )
        if not 0 < rate <= 10:
            raise self.fail(f"prosody rate must be above 0% and at most 1000%, got {value[:32]!r}")
        return rate
