"""Request planning: every request default resolved here, once, against ``Settings`` and the family.

The HTTP layer hands over its validated request models; they are read through the protocols below, so
this module never imports the wire schemas. Everything that can be rejected is rejected here, before
any audio: the model, the voice, the capabilities the request needs, the text lengths, empty text.
"""

from __future__ import annotations

import time
from typing import Literal, Protocol, TypeVar

from app.audio.post import PostOptions
from app.config import Settings
from app.core.errors import InvalidRequest, ValidationFailed
from app.core.family import ModelFamily, ReferenceVoice, Sampling, SpeechJob
from app.core.types import Attributes, Language, NormalizerMode, ResponseFormat
from app.lm.prompt import clean_text
from app.observability.tracing import span
from app.synthesis.combinations import check_text_options
from app.synthesis.engine import Engine
from app.synthesis.registry import RegisteredVoice
from app.text.normalizer import NormalizeResult
from app.text.speakable import require_speakable

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
    check_text_options(options, mode)
    malaysian_default = s.DEFAULT_NORMALIZE_MALAYSIAN and mode == "rule"  # a request may ask in spoken too
    with span("tts.normalize", {"normalizer.mode": mode, "normalizer.chars_in": len(text)}) as traced:
        started = time.perf_counter()
        result = await engine.normalizer.normalize(
            clean_text(text),
            mode=mode,
            normalize_malaysian=given(options.normalize_malaysian, malaysian_default),
            language=options.language,
            prompt=options.prompt,
            for_speech=for_speech,
        )
        engine.metrics.observe_normalize(result.mode_used, time.perf_counter() - started)
        traced.set({"normalizer.chars_out": len(result.output), "normalizer.fallback": result.fallback})
    return result


async def speech_text(engine: Engine, text: str, options: TextFields, param: str) -> str:
    """``text`` checked for length (422), normalized for speech and cleaned of markup (400 when
    nothing speakable is left: whitespace, controls, marks or emoji only, or when it reads out longer
    than MAX_SPOKEN_CHARS)."""
    check_input_length(text, engine.settings.MAX_INPUT_CHARS, param)
    normalized = await normalize_text(engine, text, options, for_speech=True)
    cleaned = clean_text(normalized.output)
    require_speakable(cleaned, param)
    limit = engine.settings.MAX_SPOKEN_CHARS
    if len(cleaned) > limit:
        raise InvalidRequest(
            f"{param}: the text reads out as {len(cleaned)} characters once normalized (numbers, dates and "
            f"the like spelled out); at most {limit} are spoken (MAX_SPOKEN_CHARS): send a shorter text",
            param=param,
            code="spoken_text_too_long",
        )
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


def request_attributes(opts: SynthesisFields) -> Attributes:
    """The request's options for the ``tts.stream`` span."""
    return {
        "playback_speed": opts.playback_speed,
        "playback_overlap_speed": opts.playback_overlap_speed,
        "response_format": opts.response_format,
        "stream": opts.stream,
        "stream_format": opts.stream_format,
        "stream_normalize": opts.stream_normalize,
        "speaking_rate": opts.speed,
    }


def speech_job(
    settings: Settings,
    family: ModelFamily,
    opts: SynthesisFields,
    text: str,
    voice: str | ReferenceVoice,
    interleave_id: str | None = None,
    retain_turns: int | None = None,
) -> SpeechJob:
    """The job a family receives, every default filled in."""
    return SpeechJob(
        model=opts.model or family.model_ids()[0],
        text=text,
        voice=voice,
        sampling=sampling(family, opts),
        first_chunk_s=given(opts.playback_speed, settings.DEFAULT_PLAYBACK_SPEED),
        overlap_s=given(opts.playback_overlap_speed, settings.DEFAULT_PLAYBACK_OVERLAP_SPEED),
        interleave_id=interleave_id,
        retain_turns=given(retain_turns, settings.MAX_RETAIN_INTERLEAVE),
        attributes=request_attributes(opts),
    )


def post_options(settings: Settings, opts: SynthesisFields) -> PostOptions:
    """The post-PCM chain this request asks for, with the settings' defaults."""
    return PostOptions(
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
