"""What a context is asked for, and the same resolved once before its first text: the family, the
voice, the sampling, the output and the text options. Everything that can be refused is refused
here, as a request's plan is (``app.synthesis.planning``), with the same errors."""

from __future__ import annotations

from dataclasses import dataclass

from app.audio.post import PostOptions
from app.audio.raw import MAX_RATE, MIN_RATE, RAW_ENCODINGS
from app.core.constants import SAMPLE_RATE
from app.core.errors import InvalidRequest
from app.core.family import ModelFamily, Sampling, StreamJob
from app.core.types import Attributes, Language, NormalizerMode
from app.synthesis.engine import Engine
from app.synthesis.planning import given, resolve_voice
from app.synthesis.spoken import voice_lexicons

RESPONSE_FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
ENCODINGS = (*RAW_ENCODINGS, *RESPONSE_FORMATS)
MIN_SPEED, MAX_SPEED = 0.5, 2.0


@dataclass(frozen=True)
class ContextRequest:
    """A context's options as a client sent them (None: the server's default)."""

    model: str | None = None
    voice: str | None = None
    encoding: str = "pcm_s16le"
    """A raw encoding (``pcm_s16le``, ``pcm_f32le``, ``pcm_mulaw``, ``pcm_alaw``) at ``sample_rate``, or
    one of the response formats (24 kHz)."""
    sample_rate: int = SAMPLE_RATE
    speed: float | None = None
    language: Language = "auto"
    mode: NormalizerMode | None = None
    timestamps: bool = False
    lexicons: tuple[str, ...] = ()
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    max_tokens: int | None = None
    repetition_penalty: float | None = None


@dataclass(frozen=True)
class TextOptions:
    """The text options of a context's pieces (``app.synthesis.planning.TextFields``)."""

    language: Language = "auto"
    mode: NormalizerMode | None = None
    normalize_malaysian: bool | None = None
    prompt: str | None = None


@dataclass(frozen=True)
class ContextPlan:
    """A context resolved: its family and stream job, its post stages, its text options and lexicons."""

    family: ModelFamily
    job: StreamJob
    post: PostOptions
    text: TextOptions
    lexicons: tuple[str, ...] = ()
    voice_lexicons: tuple[str, ...] = ()
    timestamps: bool = False
    voice: str = ""


async def plan_context(engine: Engine, request: ContextRequest, conversation: str | None) -> ContextPlan:
    """The plan of ``request`` (404 unknown model, 400 unknown voice, encoding, rate, speed or lexicon);
    ``conversation`` is the session's interleave key (used where the family keeps history, for built-in
    voices, with the store on)."""
    settings = engine.settings
    family = engine.family_for(request.model)
    voice = await resolve_voice(engine, family, request.voice)
    if request.encoding not in ENCODINGS:
        raise InvalidRequest(
            f"unknown encoding {request.encoding!r}; expected one of {', '.join(ENCODINGS)}",
            param="encoding",
            code="invalid_value",
        )
    rate = request.sample_rate
    if request.encoding in RESPONSE_FORMATS and rate != SAMPLE_RATE:
        raise InvalidRequest(
            f"{request.encoding} is {SAMPLE_RATE} Hz; other rates need a raw encoding",
            param="sample_rate",
            code="invalid_value",
        )
    if not MIN_RATE <= rate <= MAX_RATE:
        raise InvalidRequest(
            f"sample_rate must be {MIN_RATE}..{MAX_RATE}, got {rate}",
            param="sample_rate",
            code="invalid_value",
        )
    speed = given(request.speed, settings.DEFAULT_SPEAKING_RATE)
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise InvalidRequest(
            f"speed must be {MIN_SPEED}..{MAX_SPEED}, got {speed}", param="speed", code="invalid_value"
        )
    await engine.lexicons.check_names(list(request.lexicons), "lexicons")
    defaults = family.defaults
    sampling = Sampling(
        max_tokens=given(request.max_tokens, defaults.max_tokens),
        temperature=given(request.temperature, defaults.temperature),
        repetition_penalty=given(request.repetition_penalty, defaults.repetition_penalty),
        top_p=given(request.top_p, defaults.top_p),
        top_k=given(request.top_k, defaults.top_k),
        seed=given(request.seed, defaults.seed),
    )
    keeps_history = family.capabilities.multi_turn and isinstance(voice, str) and engine.interleave.enabled
    encoding = "pcm_s16le" if request.encoding == "pcm" and rate != SAMPLE_RATE else request.encoding
    attributes: Attributes = {
        "realtime": True,
        "response_format": encoding,
        "sample_rate": rate,
        "speaking_rate": speed,
    }
    job = StreamJob(
        model=request.model or family.model_ids()[0],
        voice=voice,
        sampling=sampling,
        conversation=conversation if keeps_history else None,
        retain_turns=settings.MAX_RETAIN_INTERLEAVE,
        attributes=attributes,
    )
    post = PostOptions(
        response_format=encoding,
        stream=True,
        speaking_rate=speed,
        normalize=settings.STREAM_NORMALIZE,
        target_lufs=settings.TARGET_LOUDNESS_LUFS,
        max_gain_db=settings.MAX_GAIN_DB,
        lock_s=settings.NORM_LOCK_S,
        min_estimate_s=settings.NORM_MIN_ESTIMATE_S,
        fade_in_ms=settings.FADE_IN_MS,
        sample_rate=rate,
    )
    name = request.voice or (voice if isinstance(voice, str) else "")
    return ContextPlan(
        family=family,
        job=job,
        post=post,
        text=TextOptions(language=request.language, mode=request.mode),
        lexicons=tuple(request.lexicons),
        voice_lexicons=tuple(await voice_lexicons(engine, family, request.voice)),
        timestamps=request.timestamps,
        voice=name,
    )
