"""What an input will be spoken as: ``plan_input`` turns plain text or SSML, with lexicons, into
segments of normalized text and the pauses between them.

This is the one entry point of the text front end for every place text enters speech (the speech and
voice-conversion requests, ``/v1/audio/normalize``, and a streaming session, which calls it per
message with the lexicons it resolved and its own ``normalize``). It is independent of HTTP and of
the engine: the caller passes ``normalize(text, language) -> spoken text`` (its normalizer mode and
options bound in).

- **Plain text**: the lexicons are applied (in the request's language), then ``normalize``: one
  ``Speak`` at rate 1.
- **SSML** (``app.text.ssml``): the runs of ordinary text between elements are each given the
  lexicons and ``normalize`` in their own language (``<lang>``); ``<say-as>`` is read by the spoken
  normalizer's readers for its class (``app.text.spoken.say_as``) in the language of its span
  (detected over its sentence block when "auto"), ``<sub>`` is said as its alias; neither is
  normalized again. A ``<p>``/``<s>`` ends a sentence (a full stop is put in when it has no closing
  mark, so the long-input splitter cuts there first). The result is ``Speak`` items (a new one where
  the rate changes) and ``Pause`` items (consecutive breaks add up); text with nothing to speak is
  dropped, and a plan with nothing to speak is a 400.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from app.core.errors import InvalidRequest, ValidationFailed
from app.text.lexicon import Pronouncer
from app.text.speakable import is_speakable
from app.text.spoken.language import detect_language
from app.text.spoken.say_as import read_as
from app.text.ssml import Pause, Piece, SentenceEnd, SsmlLimits, is_ssml, parse_ssml

__all__ = ["Normalize", "Pause", "Speak", "SpokenPlan", "plan_input"]

Normalize = Callable[[str, str], Awaitable[str]]
"""``normalize(text, language)``: the spoken form of ``text`` in ``language`` (en, ms, zh, ta, auto)."""

_WIDE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")
_SPACES = re.compile(r"\s+")
_CLOSING = frozenset(".!?;:,…。！？；：，、")
_NO_SPACE_BEFORE = frozenset(",.;:!?)]}…。，、；：！？）」』")


def _wide(char: str) -> bool:
    """A CJK character or full-width mark (no space is put next to another one)."""
    return _WIDE.match(char) is not None


@dataclass(frozen=True)
class Speak:
    """Normalized text spoken at ``rate`` times the request's speaking rate."""

    text: str
    rate: float = 1.0


@dataclass(frozen=True)
class SpokenPlan:
    """The segments and pauses of one input, in order, and the SSML it did not understand."""

    items: tuple[Speak | Pause, ...]
    ssml: bool = False
    ignored: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """Everything spoken, one space between segments."""
        return " ".join(item.text for item in self.items if isinstance(item, Speak))

    def marked(self) -> str:
        """The spoken text with each pause marked as ``<break time="700ms"/>``."""
        parts = [
            item.text if isinstance(item, Speak) else f'<break time="{item.ms}ms"/>' for item in self.items
        ]
        return " ".join(parts)


def _join(left: str, right: str) -> str:
    """Two runs of spoken text: one space between them, none before a closing mark or between CJK."""
    left, right = left.rstrip(), right.strip()
    if not left or not right:
        return left or right
    if right[0] in _NO_SPACE_BEFORE or (_wide(left[-1]) and _wide(right[0])):
        return left + right
    return left + " " + right


def _sentence_ended(text: str) -> str:
    """``text`` with a closing mark (a full stop, "。" after CJK) unless it has one."""
    text = text.rstrip()
    if not text or text[-1] in _CLOSING or unicodedata.category(text[-1])[0] not in "LNM":
        return text
    return text + ("。" if _wide(text[-1]) else ".")


class _Planner:
    def __init__(self, pronouncer: Pronouncer, normalize: Normalize, ignored: list[str]) -> None:
        self.pronouncer = pronouncer
        self.normalize = normalize
        self.ignored = ignored
        self.items: list[Speak | Pause] = []
        self.sentence_ended = False

    def add_text(self, text: str, rate: float) -> None:
        self._close_sentence()
        text = _SPACES.sub(" ", text)
        last = self.items[-1] if self.items else None
        if isinstance(last, Speak) and last.rate == rate:
            self.items[-1] = Speak(_join(last.text, text), rate)
        elif text.strip():
            self.items.append(Speak(text.strip(), rate))

    def add_pause(self, ms: int) -> None:
        self._close_sentence()
        if self.items and isinstance(last := self.items[-1], Pause):
            self.items[-1] = Pause(last.ms + ms)
        else:
            self.items.append(Pause(ms))

    def end_sentence(self) -> None:
        """A sentence ends here: its closing mark goes in when more follows (none after the last)."""
        self.sentence_ended = True

    def _close_sentence(self) -> None:
        if self.sentence_ended and self.items and isinstance(self.items[-1], Speak):
            last = self.items[-1]
            self.items[-1] = Speak(_sentence_ended(last.text), last.rate)
        self.sentence_ended = False

    async def plain(self, pieces: list[Piece]) -> None:
        """A run of ordinary text of one language and rate: lexicons, then the normalizer."""
        head = pieces[0]
        raw = "".join(piece.text for piece in pieces)
        lead = 0  # punctuation right after an element (", and then") stays as it is: the
        while lead < len(raw) and unicodedata.category(raw[lead])[0] not in "LNM":  # normalizer drops it
            lead += 1
        if lead:
            self.add_text(raw[:lead], head.rate)
            raw = raw[lead:]
        if raw:
            spoken = await self.normalize(self.pronouncer.apply(raw, head.language), head.language)
            self.add_text(spoken, head.rate)

    async def say_as(self, piece: Piece, language: str) -> None:
        assert piece.say_as is not None
        kind, date_format = piece.say_as
        spoken = read_as(kind, piece.text, language, date_format)
        if spoken is None:
            what = f"say-as interpret-as={kind}" + (f" format={date_format}" if date_format else "")
            if f"{what} ({piece.text.strip()[:24]})" not in self.ignored:
                self.ignored.append(f"{what} ({piece.text.strip()[:24]})")
            await self.plain([piece])
            return
        self.add_text(spoken, piece.rate)

    def plan(self, ssml: bool) -> SpokenPlan:
        items = [item for item in self.items if not isinstance(item, Speak) or is_speakable(item.text)]
        merged: list[Speak | Pause] = []
        for item in items:  # dropping unspeakable text can bring two pauses together
            previous = merged[-1] if merged else None
            if isinstance(item, Pause) and isinstance(previous, Pause):
                merged[-1] = Pause(previous.ms + item.ms)
            else:
                merged.append(item)
        return SpokenPlan(tuple(merged), ssml, tuple(self.ignored))


async def plan_input(
    text: str,
    *,
    pronouncer: Pronouncer,
    language: str,
    normalize: Normalize,
    limits: SsmlLimits,
    max_text_chars: int,
    param: str = "input",
) -> SpokenPlan:
    """The plan of ``text`` (see the module docstring). Raises InvalidRequest (400) for SSML that is
    malformed or passes ``limits``, and for an input with nothing to speak; ValidationFailed (422) when
    its text is longer than ``max_text_chars``."""
    if not is_ssml(text):
        if len(text) > max_text_chars:
            raise _too_long(param, max_text_chars, len(text))
        spoken = await normalize(pronouncer.apply(text, language), language)
        plan = SpokenPlan((Speak(spoken.strip()),) if is_speakable(spoken) else ())
    else:
        document = parse_ssml(text, limits, language, param)
        pieces = [item for item in document.items if isinstance(item, Piece)]
        length = sum(len(piece.text) for piece in pieces)
        if length > max_text_chars:
            raise _too_long(param, max_text_chars, length)
        blocks: dict[int, str] = {}
        for piece in pieces:
            blocks[piece.block] = blocks.get(piece.block, "") + piece.text
        planner = _Planner(pronouncer, normalize, document.ignored)
        run: list[Piece] = []
        for item in [*document.items, None]:  # None: the end, where the last run is planned
            if isinstance(item, Piece) and not item.say_as and not item.fixed:
                if run and (run[0].language, run[0].rate) != (item.language, item.rate):
                    await planner.plain(run)
                    run = []
                run.append(item)
                continue
            if run:
                await planner.plain(run)
                run = []
            if item is None:
                break
            if isinstance(item, Pause):
                planner.add_pause(item.ms)
            elif isinstance(item, SentenceEnd):
                planner.end_sentence()
            elif item.fixed:
                planner.add_text(item.text, item.rate)
            else:
                language_of = (
                    item.language if item.language != "auto" else detect_language(blocks[item.block])
                )
                await planner.say_as(item, language_of)
        plan = planner.plan(ssml=True)
    if not any(isinstance(item, Speak) for item in plan.items):
        raise InvalidRequest(
            f"{param}: nothing speakable (no letter or digit) after normalization",
            param=param,
            code="no_speakable_text",
        )
    return plan


def _too_long(param: str, limit: int, length: int) -> ValidationFailed:
    return ValidationFailed(f"{param}: at most {limit} characters are accepted, got {length}", param=param)
