"""The model-family seam: what a family of TTS models implements to be served through the API.

A family (NeuCodec today, MOSS-TTS-Realtime next) answers to some ``model`` ids, has built-in voices,
declares its capabilities, and turns a planned request (a ``SpeechJob``: text already normalized,
voice resolved, every default filled in) into an ``Utterance``: first ``plan`` checks everything that
can be known before audio (raising ``APIError``), then ``Utterance.stream`` yields float32 mono 24 kHz
PCM chunks, shape ``(samples,)``, and stops its generation when the iterator is closed. Everything after
the PCM (loudness, speed, fade, encoders, transports, metrics) is shared and lives outside the family.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from app.core.settings import ServerSettings
from app.core.stats import UtteranceStats
from app.core.types import Attributes
from app.core.voices import VoiceCatalog

OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")
"""OpenAI's TTS model names: the default family answers to them (and to dated ``gpt-4o-mini-tts-*``)."""


def openai_model(name: str) -> bool:
    """An OpenAI TTS model name or a dated variant of one (``gpt-4o-mini-tts-2025-12-15``)."""
    return name in OPENAI_MODELS or name.startswith("gpt-4o-mini-tts-")


@dataclass(frozen=True)
class Capabilities:
    """What a family can do beyond speaking text in a built-in voice."""

    reference_voice: bool = False
    """A voice from reference audio: ``/v1/audio/vc`` and registered voices."""
    multi_turn: bool = False
    """Requests that share an interleave id continue one conversation's context."""

    def lacking(self, reference_voice: bool = False, multi_turn: bool = False) -> list[str]:
        """The capabilities asked for that this family does not have, by name."""
        asked = {"reference_voice": reference_voice, "multi_turn": multi_turn}
        return [name for name, wanted in asked.items() if wanted and not getattr(self, name)]


@dataclass(frozen=True)
class Sampling:
    """The sampling of one generation; ``top_p``, ``top_k`` and ``seed`` are the backend's when None."""

    max_tokens: int
    temperature: float
    repetition_penalty: float
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None


@dataclass(frozen=True)
class ContextWindow:
    """A family's context window, which history and prompts are fitted to: its length and the room a new
    generation always keeps, in the family's own units (NeuCodec: LM tokens; MOSS: frame positions)."""

    positions: int
    min_generation: int


@dataclass(frozen=True)
class ReferenceFormat:
    """How a family takes reference audio: the rate it wants the clip at, the shape of its codes, and
    whether it needs the clip's transcript."""

    rate: int = 16_000
    """Sample rate of the samples ``encode_reference`` receives."""
    codebooks: int = 1
    """Codes per frame: a voice's codes are kept flat, frame by frame (``frames`` gives them back)."""
    needs_transcript: bool = True
    """The prompt quotes the reference's transcript (NeuCodec); False when the audio alone is the voice."""


@dataclass(frozen=True)
class ReferenceVoice:
    """A voice given by reference audio: its transcript (normalized; may be empty when the family needs
    none) and its speech codes, flat and frame-major, ``codebooks`` per frame."""

    text: str
    codes: tuple[int, ...]
    codebooks: int = 1

    def frames(self) -> np.ndarray:
        """The codes as int64 ``(frames, codebooks)``."""
        return np.asarray(self.codes, dtype=np.int64).reshape(-1, self.codebooks)


@dataclass(frozen=True)
class SpeechJob:
    """One request as a family receives it: everything resolved, nothing left to default."""

    model: str
    text: str
    voice: str | ReferenceVoice
    sampling: Sampling
    first_chunk_s: float | None = None
    """Audio in the first chunk, in seconds (the API's ``playback_speed``); None: the family's default."""
    overlap_s: float | None = None
    """Future context decoded with each chunk, in seconds (``playback_overlap_speed``); None: the family's
    default."""
    interleave_id: str | None = None
    retain_turns: int = 0
    attributes: Attributes = field(default_factory=dict)
    """The request's options, for the ``tts.stream`` span."""


class Utterance(Protocol):
    """A planned request, ready to stream."""

    def headers(self) -> Mapping[str, str]:
        """Extra response headers; read after the first chunk (a family may change its plan before it)."""
        ...

    def stream(self, stats: UtteranceStats) -> AsyncGenerator[np.ndarray, None]:
        """float32 mono 24 kHz chunks, shape (samples,), filling ``stats`` as it goes; closing it stops
        the generation."""
        ...


@dataclass(frozen=True)
class SpokenPiece:
    """A complete piece of a streamed text (``app.text.stream_split``) as a family receives it: what is
    spoken (normalized), what the client wrote (its words are the word timestamps' words), what ended it
    (sentence, clause, word or end) and whether whitespace separated it from the piece before."""

    text: str
    written: str
    kind: str = "end"
    spaced: bool = True


@dataclass(frozen=True)
class WordTiming:
    """One written word and where it is heard: seconds of the stream's 24 kHz audio from its start."""

    word: str
    start: float
    end: float


StreamItem = np.ndarray | WordTiming
"""What a speech stream yields: float32 mono 24 kHz PCM ``(samples,)``, or a word's timing (never ahead
of the audio already yielded by more than the word itself)."""


@dataclass(frozen=True)
class StreamJob:
    """One turn of a realtime session as a family receives it: everything resolved except the text,
    which arrives piece by piece."""

    model: str
    voice: str | ReferenceVoice
    sampling: Sampling
    conversation: str | None = None
    """The interleave key of the session: earlier turns in it are this turn's history (where the family
    keeps history), and this turn is stored there when it ends normally. None: no history."""
    retain_turns: int = 0
    first_chunk_s: float | None = None
    overlap_s: float | None = None
    attributes: Attributes = field(default_factory=dict)


class SpeechStream(Protocol):
    """A turn whose text is still arriving: pieces in, audio and word timings out."""

    def push(self, piece: SpokenPiece) -> None:
        """The next complete piece of the text (normalized)."""
        ...

    def end(self) -> None:
        """No more text: speak what is left and finish."""
        ...

    def stream(self, stats: UtteranceStats) -> AsyncGenerator[StreamItem, None]:
        """The turn's PCM chunks and word timings as they are made, filling ``stats``; ends once the
        text has ended and been spoken. Closing it stops every generation and frees what it holds
        within one step."""
        ...


class ModelFamily(Protocol):
    """A family of models served through the API."""

    name: str
    capabilities: Capabilities
    reference: ReferenceFormat
    voices: VoiceCatalog
    defaults: Sampling

    def model_ids(self) -> Sequence[str]:
        """The ``model`` ids this family answers to (its served names)."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def ready(self) -> dict[str, bool]:
        """Readiness of each part, by name."""
        ...

    def details(self) -> dict[str, object]:
        """What the family chose at startup and why (for ``/ready``), e.g. its codec's precision."""
        ...

    def context_window(self) -> ContextWindow:
        """The window its prompts and history are fitted to."""
        ...

    async def plan(self, job: SpeechJob) -> Utterance:
        """Check ``job`` and prepare it; raises APIError for anything known before the first byte."""
        ...

    async def open_stream(self, job: StreamJob) -> SpeechStream:
        """A realtime turn: check ``job`` (APIError for anything known before its text) and return its
        stream (``app.families.shared.segmented`` gives one for any family from ``plan``)."""
        ...

    def check_can_encode(self) -> None:
        """Raise APIError when this family cannot encode reference audio now."""
        ...

    async def encode_reference(self, samples: np.ndarray, digest: str) -> list[int]:
        """Speech codes of a reference clip, flat and frame-major (``reference.codebooks`` per frame):
        ``samples`` are float32 mono at ``reference.rate``, shape (S,); ``digest`` is their content hash,
        the cache key."""
        ...


@dataclass(frozen=True)
class FamilySpec:
    """A model family as the registry (``app.families.registry``) lists it: its name, its settings class
    (composed into ``app.config.Settings``) and where the rest of it lives, imported only when used."""

    name: str
    """What ``MODEL_FAMILIES`` calls it."""
    settings: type[ServerSettings]
    """Its settings class: a ``ServerSettings`` subclass holding the family's own fields."""
    family: str
    """``module:Class`` of its ``ModelFamily``, built as ``Class(settings, interleave, metrics)``."""
    fixtures: str | None = None
    """Module of its tiny-checkpoint writer (``python -m app.tools.fixtures``): ``add_arguments(parser)``
    and ``write(out, args)``; None when it has no checkpoints of its own."""
    precision: str | None = None
    """Module whose ``PARTS`` lists its parts for the precision tool; None when it has none."""
