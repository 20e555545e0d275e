"""Speech tokens as text: ``<|s_N|>`` <-> NeuCodec code ``N`` (0..65535).

A backend that streams text (vLLM's ``/v1/completions``) may cut a token anywhere, so
``SpeechTokenParser`` keeps the unfinished tail of one event and completes it with the next.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SPEECH_CODES = 65536
"""NeuCodec's FSQ codebook size: codes are 0..65535."""

_TOKEN = re.compile(r"<\|s_(\d+)\|>")
# What a cut-off token can look like at the end of an event: "<", "<|", "<|s", "<|s_", "<|s_12", "<|s_12|".
_PARTIAL = re.compile(r"<(?:\|(?:s(?:_(?:\d+\|?)?)?)?)?\Z")


class SpeechTokenError(ValueError):
    """The text holds a well-formed speech token whose code is outside 0..65535."""


class SpeechTokenParser:
    """Incremental ``<|s_N|>`` parser over a stream of text pieces.

    ``feed`` returns the codes of the tokens completed so far. Text that is not part of a speech token
    (``<|im_end|>``, stray words) is dropped. A token whose number is out of range raises
    ``SpeechTokenError``: it means the LM and the codec disagree on the vocabulary, which must not pass
    as silence. Work per call is proportional to the new text plus a tail of at most a few characters.
    """

    def __init__(self) -> None:
        self._tail = ""

    def feed(self, text: str) -> list[int]:
        """Parse ``text`` (continuing any partial token from the previous call) and return its codes."""
        buffer = self._tail + text if self._tail else text
        codes: list[int] = []
        end = 0
        for match in _TOKEN.finditer(buffer):
            code = int(match.group(1))
            if code >= SPEECH_CODES:
                self._tail = ""
                raise SpeechTokenError(f"speech token {match.group(0)} is outside 0..{SPEECH_CODES - 1}")
            codes.append(code)
            end = match.end()
        start = buffer.rfind("<", end)
        self._tail = buffer[start:] if start >= 0 and _PARTIAL.match(buffer, start) else ""
        return codes


def format_speech_tokens(codes: Iterable[int]) -> str:
    """Render codes as ``<|s_N|>`` tokens, e.g. for an interleave history or a VC reference."""
    codes = list(codes)
    if codes and (min(codes) < 0 or max(codes) >= SPEECH_CODES):
        raise ValueError(f"speech codes must be in 0..{SPEECH_CODES - 1}")
    return "".join(map("<|s_{}|>".format, codes))
