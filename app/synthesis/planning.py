"""Request planning: every request default resolved here, once, against ``ServerSettings`` and the family.

The HTTP layer hands over its validated request models; they are read through the protocols below, so
this module never imports the wire schemas. Everything that can be rejected is rejected here, before
any audio: the model, the voice, the capabilities the request needs, the text lengths, empty text.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from app.audio.post import PostOptions
from app.core.errors import InvalidRequest, ValidationFailed
from app.core.family import ModelFamily, ReferenceVoice, Sampling, SpeechJob
from app.core.settings import ServerSettings
from app.core.types import Attributes, Language, NormalizerMode, ResponseFormat
from app.families.shared.long_input import part_seed
from app.interleave.ids import HEADER as INTERLEAVE_HEADER
from app.interleave.ids import header_echo
from app.observability.tracing import span
from app.synthesis.engine import Engine
from app.synthesis.registry import RegisteredVoice
from app.text.clean import clean_text
from app.text.normalizer import NormalizeResult
from app.text.speakable import require_speakable
from app.text.speech_plan import SpokenPlan

T = TypeVar("T")


def given(value: T | None, default: T) -> T:
    """``value`` when the request set it, else the ``default``."""
    return default if value is None else value


class TextFields(Protocol):
    """How a request's text is normalized (``TextOptions`` on the wire)."""

    @property
    def mode(self) -> NormalizerMode | None: ...

    @property
    def normalize_malaysian(self) -> bool | None: ...

    @property
    def language(self) -> Language: ...

    @property
    def prompt(self) -> str | None: ...


class SynthesisFields(Protocol):
    """The model, sampling and output fields every synthesis request has (speech and VC)."""

    model: str | None
    response_format: ResponseFormat
    speed: float | None
    stream_format: Literal["audio", "sse"]
    stream: bool
    temperature: float | None
    repetition_penalty: float | None
    max_tokens: int | None
    top_p: float | None
    top_k: int | None
    seed: int | None
    playback_speed: float | None
    playback_overlap_speed: float | None
    stream_normalize: bool | None


def check_input_length(text: str, limit: int, param: str = "input") -> None:
    """422 on a text field longer than ``limit`` characters."""
    if len(text) > limit:
        raise ValidationFailed(
            f"{param}: at most {limit} characters are accepted, got {len(text)}", param=param
        )


async def normalize_text(engine: Engine, text: str, options: TextFields, for_speech: bool) -> NormalizeResult:
    """``text`` through the engine's normalizer with the request's options and the settings' defaults."""
    s = engine.settings
    mode = options.mode or s.DEFAULT_NORMALIZER_MODE
    with span("tts.normalize", {"normalizer.mode": mode, "normalizer.chars_in": len(text)}) as traced:
        started = time.perf_counter()
        result = await engine.normalizer.normalize(
            clean_text(text),
            mode=mode,
            normalize_malaysian=given(options.normalize_malaysian, s.DEFAULT_NORMALIZE_MALAYSIAN),
            language=options.language,
            prompt=options.prompt,
            for_speech=for_speech,
        )
        engine.metrics.observe_normalize(result.mode_used, time.perf_counter() - started)
        traced.set({"normalizer.chars_out": len(result.output), "normalizer.fallback": result.fallback})
    return result


async def speech_text(engine: Engine, text: str, options: TextFields, param: str) -> str:
    """``text`` checked for length (422), normalized for speech and cleaned of markup (400 when
    nothing speakable is left: whitespace, controls, marks or emoji only)."""
    check_input_length(text, engine.settings.MAX_INPUT_CHARS, param)
    normalized = await normalize_text(engine, text, options, for_speech=True)
    cleaned = clean_text(normalized.output)
    require_speakable(cleaned, param)
    return cleaned


async def resolve_voice(engine: Engine, family: ModelFamily, name: str | None) -> str | ReferenceVoice:
    """The family's built-in voice or alias (never asks the registry, so built-in voices work while a
    shared voice store is down), else a registered voice by that name (400 when the family cannot speak
    in one), else a 400 naming the valid voices. 503 when the registry is needed and unavailable."""
    if name is None or name in family.voices.names():
        return family.voices.resolve(name)
    registry = engine.registry
    registered = await registry.get(name)
    if registered is not None:
        engine.require(family, reference_voice=True)
        return reference_voice(registered, family)
    return family.voices.resolve(name, [voice.name for voice in await registry.voices()])


def reference_voice(voice: RegisteredVoice, family: ModelFamily) -> ReferenceVoice:
    """A registered voice as ``family`` sees it (400 when it holds no usable codes of that family, or
    no transcript when the family needs one)."""
    codes = voice.codes.get(family.name)
    shape = family.reference
    if codes is None or len(codes) % shape.codebooks or (shape.needs_transcript and not voice.reference_text):
        lacking = "a transcript" if codes is not None and len(codes) % shape.codebooks == 0 else "codes"
        raise InvalidRequest(
            f"The voice {voice.name!r} was registered without {lacking} for this model "
            f"(it has codes for {', '.join(voice.codes)}); register it again for this one.",
            param="voice",
            code="voice_not_available_for_model",
        )
    return ReferenceVoice(voice.reference_text, codes, shape.codebooks)


def sampling(family: ModelFamily, opts: SynthesisFields) -> Sampling:
    """The request's sampling, with the family's defaults for what it leaves out."""
    defaults = family.defaults
    return Sampling(
        max_tokens=given(opts.max_tokens, defaults.max_tokens),
        temperature=given(opts.temperature, defaults.temperature),
        repetition_penalty=given(opts.repetition_penalty, defaults.repetition_penalty),
        top_p=given(opts.top_p, defaults.top_p),
        top_k=given(opts.top_k, defaults.top_k),
        seed=given(opts.seed, defaults.seed),
    )


@dataclass(frozen=True)
class Conversation:
    """The interleave id a request continues: as the client named it (echoed in ``X-Interleave-Id``) and
    as the store knows it (in its API key's namespace)."""

    name: str
    key: str


IGNORED_HEADER = "X-SSML-Ignored"
"""Response header: the SSML elements and attributes that were read as plain text, comma-separated."""


@dataclass(frozen=True)
class SpeechPlan:
    """A synthesis request with every option resolved, once: what its family speaks (``job``, and the
    segments and pauses of ``spoken``: one segment for plain text), what the post stages do (``post``),
    the response's shape and the span attributes. Everything after planning reads this, never the
    request again."""

    family: ModelFamily
    job: SpeechJob
    spoken: SpokenPlan
    post: PostOptions
    stream_format: Literal["audio", "sse"]
    conversation: Conversation | None = None

    @property
    def attributes(self) -> Attributes:
        """The request's options for the ``tts.stream`` span."""
        return self.job.attributes

    @property
    def ignored(self) -> tuple[str, ...]:
        """SSML read as plain text (the header and the SSE done event say so)."""
        return self.spoken.ignored

    def segment_job(self, text: str, index: int) -> SpeechJob:
        """The job of segment ``index``: its text, the request's seed derived for it (as for the parts of
        a long input; segment 0 keeps the request's)."""
        sampling = dataclasses.replace(self.job.sampling, seed=part_seed(self.job.sampling.seed, index))
        return dataclasses.replace(self.job, text=text, sampling=sampling)

    def headers(self) -> dict[str, str]:
        """Headers of the response the plan itself knows: the interleave id it continues, and the SSML
        it read as plain text (ASCII only)."""
        headers = {}
        if self.conversation is not None:
            headers[INTERLEAVE_HEADER] = header_echo(self.conversation.name)
        if self.ignored:
            value = ", ".join(self.ignored).encode("ascii", "backslashreplace").decode("ascii")
            headers[IGNORED_HEADER] = value[:1024]
        return headers


def plan_request(
    settings: ServerSettings,
    family: ModelFamily,
    opts: SynthesisFields,
    spoken: SpokenPlan,
    voice: str | ReferenceVoice,
    conversation: Conversation | None = None,
    retain_turns: int | None = None,
) -> SpeechPlan:
    """The plan of a request whose text is normalized into ``spoken`` and whose voice is resolved."""
    post = PostOptions(
        response_format=opts.response_format,
        stream=opts.stream,
        speaking_rate=given(opts.speed, settings.DEFAULT_SPEAKING_RATE),
        normalize=given(opts.stream_normalize, settings.STREAM_NORMALIZE),
        target_lufs=settings.TARGET_LOUDNESS_LUFS,
        max_gain_db=settings.MAX_GAIN_DB,
        lock_s=settings.NORM_LOCK_S,
        min_estimate_s=settings.NORM_MIN_ESTIMATE_S,
        fade_in_ms=settings.FADE_IN_MS,
    )
    attributes: Attributes = {
        "playback_speed": opts.playback_speed,
        "playback_overlap_speed": opts.playback_overlap_speed,
        "response_format": post.response_format,
        "stream": post.stream,
        "stream_format": opts.stream_format,
        "stream_normalize": post.normalize,
        "speaking_rate": post.speaking_rate,
    }
    job = SpeechJob(
        model=opts.model or family.model_ids()[0],
        text=spoken.text,
        voice=voice,
        sampling=sampling(family, opts),
        first_chunk_s=opts.playback_speed,
        overlap_s=opts.playback_overlap_speed,
        interleave_id=None if conversation is None else conversation.key,
        retain_turns=given(retain_turns, settings.MAX_RETAIN_INTERLEAVE),
        attributes=attributes,
    )
    return SpeechPlan(family, job, spoken, post, opts.stream_format, conversation)
