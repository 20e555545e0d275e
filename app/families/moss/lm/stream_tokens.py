"""Text arriving in pieces -> the ids the whole text encodes to, each emitted once no later text can
change it (the hold-back of a streaming detokenizer, the other way round).

A BPE tokenizer merges only inside a pre-token (the pieces its pre-tokenizer's pattern cuts a text
into: a word with its leading space, a run of digits, of punctuation, of whitespace), and where a
pre-token ends can depend on the characters after it (``\\s+(?!\\S)`` looks one ahead, a word goes on
while letters come). So after each push the last ``hold`` pre-tokens are held back, and the ids of the
text before them are emitted: ``encode(before)``, which is checked to be the start of
``encode(pending)`` (when it is not, nothing is emitted yet). The rest is emitted at ``end``. A text
pushed in any pieces therefore gives ``encode(whole)`` (tested with the fixture's byte tokenizer and
with a trained BPE with merges). Each push encodes the pending text, never the whole of a turn.

A tokenizer without a fast backend has no pre-tokenizer to ask; then the pre-tokens are taken to be
whitespace-led words (``\\s*\\S+``), the pattern every byte-level BPE's starts with.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

HOLD = 2
"""Pre-tokens held back after each push."""
WORDS = re.compile(r"\s*\S+|\s+")

Encode = Callable[[str], list[int]]
Spans = Callable[[str], list[tuple[int, int]]]


def pretoken_spans(tokenizer: Any) -> Spans:
    """Where the tokenizer's pre-tokenizer cuts a text: ``(start, end)`` character offsets."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    pre = getattr(backend, "pre_tokenizer", None) if backend is not None else None
    if pre is None:
        return lambda text: [match.span() for match in WORDS.finditer(text)]
    return lambda text: [span for _, span in pre.pre_tokenize_str(text)]


class StreamTokenizer:
    """``push`` pieces of a text, ``end`` it: the ids of the whole text, in order (module docstring)."""

    def __init__(self, encode: Encode, spans: Spans, hold: int = HOLD) -> None:
        self.encode = encode
        self.spans = spans
        self.hold = hold
        self.pending = ""  # text not emitted yet
        self.emitted = 0  # ids emitted so far

    def push(self, text: str) -> list[int]:
        """The ids that ``text`` (the next piece) makes certain."""
        self.pending += text
        spans = self.spans(self.pending)
        if len(spans) <= self.hold:
            return []
        cut = spans[-self.hold][0]
        if cut <= 0:
            return []
        ids = self.encode(self.pending[:cut])
        if self.encode(self.pending)[: len(ids)] != ids:
            return []  # the cut is not a clean boundary of this text: wait for more
        self.pending = self.pending[cut:]
        self.emitted += len(ids)
        return ids

    def end(self) -> list[int]:
        """The ids of what is still held back (the text has ended)."""
        ids = self.encode(self.pending) if self.pending else []
        self.pending = ""
        self.emitted += len(ids)
        return ids
