"""What a session sends its client, protocol-neutral: each face writes them in its own shape."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.errors import APIError
from app.core.family import WordTiming


@dataclass(frozen=True)
class Audio:
    """Encoded audio of a context, in its output format."""

    context_id: str
    data: bytes


@dataclass(frozen=True)
class Timestamps:
    """Word timings of a context: seconds of the audio sent for it, after the speed change."""

    context_id: str
    words: tuple[WordTiming, ...]


@dataclass(frozen=True)
class Acknowledged:
    """A context's text message ``seq`` was taken."""

    context_id: str
    seq: int


@dataclass(frozen=True)
class Flushed:
    """The text before a flush was cut into pieces and handed to the model (``flush_id``: its count)."""

    context_id: str
    flush_id: int


@dataclass(frozen=True)
class Done:
    """A context finished: everything was spoken and sent."""

    context_id: str
    usage: dict[str, float | int] = field(default_factory=dict)


@dataclass(frozen=True)
class Failed:
    """A context (or, with ``context_id`` None, the connection) failed with ``error``."""

    context_id: str | None
    error: APIError


Event = Audio | Timestamps | Acknowledged | Flushed | Done | Failed
