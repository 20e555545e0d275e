"""Options that apply only together: every option a request sets is honoured, or the request is refused
with a 400 naming it (code ``incompatible_options``) before any audio. Nothing a client asked for is
silently dropped.

- ``stream_format: "sse"`` is a way of streaming: with ``stream: false`` the request is refused (an SSE
  body or the whole file would each ignore one of the two).
- ``prompt`` instructs the ``llm`` normalizer: with another mode (asked for, or the server's default) it
  is refused. On the speech routes an llm mode that is not configured or fails falls back to ``spoken``
  (documented, and reported by ``/v1/audio/normalize``); the prompt is accepted there.
- ``normalize_malaysian: true`` adds the Malaysian pronunciation table to the entity reading of the
  ``rule`` and ``spoken`` modes; the ``llm`` mode reads text its own way, so there it is refused.

Honoured by every family: ``playback_speed`` is the first decode's audio (NeuCodec: the first window;
MOSS: that many 80 ms frames); ``playback_overlap_speed`` is the future context of each NeuCodec window
(the MOSS codec is causal: its audio is the same with any future context). Accepted and documented as
having no effect: ``instructions`` (OpenAI's field, for its own models), and an interleave id with a
registered or reference voice (INTERLEAVE.md; the response then carries no interleave headers).
"""

from __future__ import annotations

from typing import Literal, Protocol

from app.core.errors import InvalidRequest
from app.core.types import NormalizerMode


class StreamFields(Protocol):
    """How a synthesis is sent back."""

    stream: bool
    stream_format: Literal["audio", "sse"]


class ModeFields(Protocol):
    """The text options that belong to some modes only."""

    @property
    def normalize_malaysian(self) -> bool | None: ...

    @property
    def prompt(self) -> str | None: ...


def _incompatible(message: str, param: str) -> InvalidRequest:
    return InvalidRequest(message, param=param, code="incompatible_options")


def check_text_options(options: ModeFields, mode: NormalizerMode) -> None:
    """400 for a text option that ``mode`` (the one the text is normalized with) cannot apply."""
    if options.prompt and mode != "llm":
        raise _incompatible(
            f"prompt: instructions for the llm normalizer, and the mode is {mode!r}; set mode 'llm' or "
            "leave prompt out",
            "prompt",
        )
    if options.normalize_malaysian and mode == "llm":
        raise _incompatible(
            "normalize_malaysian: an option of the rule and spoken modes, and the mode is 'llm' (which "
            "reads the text its own way); set another mode or leave normalize_malaysian out",
            "normalize_malaysian",
        )


def check_stream_options(options: StreamFields) -> None:
    """400 for a transport option that cannot be honoured with the rest."""
    if options.stream_format == "sse" and not options.stream:
        raise _incompatible(
            "stream_format: 'sse' streams events, and the request sets stream: false; send stream: true "
            "for SSE, or stream_format 'audio' for the whole file",
            "stream_format",
        )
