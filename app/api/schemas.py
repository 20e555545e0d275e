"""Wire models of the speech API, in OpenAI's field order, with our extensions after them.

The multipart forms (``VCForm``, ``VoiceUploadForm``) reuse the speech request's field definitions,
so every shared option has the same range, default and alias on every endpoint.

Unknown fields are ignored (the OpenAI SDK sends extensions through ``extra_body``). Ranges are
checked here (422 with the OpenAI error body); checks that need settings live in ``app.synthesis.planning``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from app.core.defaults import MAX_INTERLEAVE_ID_CHARS, MAX_PROMPT_CHARS
from app.core.types import Language, NormalizerMode, ResponseFormat

# Field types shared by the speech request and the multipart forms (Annotated, so that each model
# declares the field with the same range, alias and description).
Mode = Annotated[
    NormalizerMode | None, Field(description="rule | spoken | llm; default DEFAULT_NORMALIZER_MODE.")
]
NormalizeMalaysian = Annotated[
    bool | None,
    Field(
        description="Malaysian pronunciations and entities in rule mode (default "
        "DEFAULT_NORMALIZE_MALAYSIAN), and in spoken mode when true; refused with llm."
    ),
]
TextLanguage = Annotated[Language, Field(description="Language of the text; auto detects it per sentence.")]
Prompt = Annotated[
    str | None,
    Field(
        max_length=MAX_PROMPT_CHARS, description="Extra instructions for the llm mode (refused with another)."
    ),
]
Model = Annotated[
    str | None,
    Field(
        description="tts-1, tts-1-hd, gpt-4o-mini-tts, or a loaded family's id (MODEL_NAME, MOSS_MODEL_NAME)."
    ),
]
Format = Annotated[
    ResponseFormat, Field(description="pcm (24 kHz s16le mono), wav, mp3, opus (Ogg), aac (ADTS) or flac.")
]
Speed = Annotated[
    float | None,
    Field(
        ge=0.5,
        le=2.0,
        validation_alias=AliasChoices("speed", "speaking_rate"),
        description="Speaking rate, pitch kept (alias speaking_rate); default DEFAULT_SPEAKING_RATE.",
    ),
]
StreamFormat = Annotated[
    Literal["audio", "sse"],
    Field(description="audio: raw bytes; sse: OpenAI speech.audio.delta/done events (needs stream true)."),
]
Stream = Annotated[bool, Field(description="Stream audio as it is generated, or return it whole.")]
Temperature = Annotated[float | None, Field(ge=0, le=2)]
RepetitionPenalty = Annotated[float | None, Field(gt=0, le=2)]
MaxTokens = Annotated[
    int | None,
    Field(
        ge=1,
        le=32768,
        description=(
            "Speech tokens per generation, a longer input being spoken in several: NeuCodec codes "
            "(50 per second) or MOSS frames (12.5 per second)."
        ),
    ),
]
TopP = Annotated[float | None, Field(gt=0, le=1)]
TopK = Annotated[int | None, Field(ge=1, le=2**31 - 1)]  # vLLM keeps top_k in a 32-bit tensor
Seed = Annotated[int | None, Field(ge=0, le=2**63 - 1)]
PlaybackSpeed = Annotated[
    float | None,
    Field(ge=0.02, le=60, description="Seconds of audio in the first decode (MOSS: in 80 ms frames)."),
]
PlaybackOverlapSpeed = Annotated[
    float | None, Field(ge=0, le=2, description="Seconds of future context per decode window.")
]
MAX_REQUEST_LEXICONS = 8
Lexicons = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=64)]] | None,
    Field(
        max_length=MAX_REQUEST_LEXICONS,
        description="Registered lexicons to apply, first wins; before the voice's and the server's.",
    ),
]
FormLexicons = Annotated[
    str, Field(max_length=1024, description="Registered lexicons to apply, comma-separated, first wins.")
]


def _names(value: str) -> list[str]:
    """The names of a comma-separated form field."""
    return [name.strip() for name in value.split(",") if name.strip()]


StreamNormalize = Annotated[
    bool | None, Field(description="Loudness normalization; default STREAM_NORMALIZE.")
]


class TextOptions(BaseModel):
    """How the input text is normalized before it reaches the LM (shared by every text endpoint)."""

    mode: Mode = None
    normalize_malaysian: NormalizeMalaysian = None
    language: TextLanguage = "auto"
    prompt: Prompt = None


class VoiceRef(BaseModel):
    """OpenAI's object form of ``voice``: ``{"id": "..."}``."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(min_length=1, max_length=128)


class NormalizeRequest(TextOptions):
    """Body of ``POST /v1/audio/normalize``."""

    model_config = ConfigDict(extra="ignore")
    input: str = Field(min_length=1, description="Text or SSML to normalize (at most MAX_INPUT_CHARS).")
    lexicons: Lexicons = None


class SpokenSegment(BaseModel):
    """One item of an SSML input's plan: text spoken at ``rate`` times the speed, or a break."""

    type: Literal["speech", "break"]
    text: str | None = None
    rate: float | None = None
    ms: int | None = Field(None, description="A break's silence, in milliseconds.")


class NormalizeResponse(BaseModel):
    """The normalized text and the mode that produced it; for SSML also its segments (``output`` then
    marks each break as ``<break time="700ms"/>``) and what was read as plain text."""

    output: str
    mode: NormalizerMode
    segments: list[SpokenSegment] | None = None
    ignored: list[str] | None = None


class SpeechRequest(BaseModel):
    """Body of ``POST /v1/audio/speech``."""

    model_config = ConfigDict(extra="ignore")

    model: Model = None
    input: str = Field(min_length=1, description="Text to speak (at most MAX_INPUT_CHARS).")
    voice: str | VoiceRef | None = Field(None, description="A voice, an alias, or {'id': voice}.")
    instructions: str | None = Field(None, max_length=4096, description="Accepted; has no effect.")
    response_format: Format = "pcm"
    speed: Speed = None
    stream_format: StreamFormat = "audio"

    stream: Stream = True
    temperature: Temperature = None
    repetition_penalty: RepetitionPenalty = None
    max_tokens: MaxTokens = None
    top_p: TopP = None
    top_k: TopK = None
    seed: Seed = None
    playback_speed: PlaybackSpeed = None
    playback_overlap_speed: PlaybackOverlapSpeed = None
    stream_normalize: StreamNormalize = None
    mode: Mode = None
    normalize_malaysian: NormalizeMalaysian = None
    language: TextLanguage = "auto"
    prompt: Prompt = None
    interleave_id: str | None = Field(
        None,
        max_length=MAX_INTERLEAVE_ID_CHARS,
        description="Turn history id shared by the requests of one reply (or header X-Interleave-Id; "
        "the body wins). See docs/interleave.md.",
    )
    max_retain_interleave: int | None = Field(
        None,
        ge=0,
        le=64,
        description="History turns in the prompt, 0 = no limit; default MAX_RETAIN_INTERLEAVE.",
    )
    lexicons: Lexicons = None

    def text_options(self) -> TextOptions:
        """The text-normalization fields of this request."""
        return TextOptions.model_validate(self, from_attributes=True)

    def voice_name(self) -> str | None:
        """The requested voice as a plain string (None = default)."""
        return self.voice.id if isinstance(self.voice, VoiceRef) else self.voice

    def lexicon_names(self) -> list[str]:
        return list(self.lexicons or ())


class VCForm(BaseModel):
    """Form fields of ``POST /v1/audio/vc`` (the file ``reference_audio`` is a separate part)."""

    model_config = ConfigDict(extra="ignore")

    reference_text: str = Field(
        "", description="Transcript of the reference audio (required by models whose prompt quotes it)."
    )
    generate_text: str = Field(min_length=1, description="Text to speak in the reference voice.")
    model: Model = None
    response_format: Format = "pcm"
    temperature: Temperature = None
    repetition_penalty: RepetitionPenalty = None
    max_tokens: MaxTokens = None
    stream: Stream = True
    playback_speed: PlaybackSpeed = None
    playback_overlap_speed: PlaybackOverlapSpeed = None
    speed: Speed = None
    stream_format: StreamFormat = "audio"
    top_p: TopP = None
    top_k: TopK = None
    seed: Seed = None
    stream_normalize: StreamNormalize = None
    mode: Mode = None
    normalize_malaysian: NormalizeMalaysian = None
    language: TextLanguage = "auto"
    prompt: Prompt = None
    lexicons: FormLexicons = ""

    def text_options(self) -> TextOptions:
        """How both texts are normalized."""
        return TextOptions.model_validate(self, from_attributes=True)

    def lexicon_names(self) -> list[str]:
        return _names(self.lexicons)


class VoiceUploadForm(BaseModel):
    """Form fields of ``POST /v1/audio/voices`` (the file ``audio_sample`` is a separate part)."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, description="Voice name: 1-64 of A-Z a-z 0-9 _ -.")
    reference_text: str = Field(
        "", description="Transcript of the audio sample (required by models whose prompt quotes it)."
    )
    consent: str | None = Field(
        None, max_length=1024, description="Consent record of the speaker (stored, not checked)."
    )
    language: TextLanguage = "auto"
    lexicons: str = Field(
        "", max_length=1024, description="Registered lexicons attached to the voice, comma-separated."
    )

    def lexicon_names(self) -> list[str]:
        return _names(self.lexicons)


class LexiconEntryIn(BaseModel):
    """One entry: ``grapheme`` (the written form) is said as ``alias``."""

    model_config = ConfigDict(extra="forbid")
    grapheme: str = Field(min_length=1, max_length=128)
    alias: str = Field(min_length=1, max_length=512)
    case_sensitive: bool | None = Field(None, description="Match the case as written; default the lexicon's.")
    language: str | None = Field(None, description="Only in text of this language (en, ms, zh, ta).")


class LexiconCreate(BaseModel):
    """Body of ``POST /v1/audio/lexicons``: JSON ``entries`` or a W3C PLS document (``pls``)."""

    model_config = ConfigDict(extra="ignore")
    name: str = Field(min_length=1, max_length=64, description="Lexicon name: 1-64 of A-Z a-z 0-9 _ -.")
    entries: list[LexiconEntryIn] | None = Field(None, description="The entries (or give pls).")
    pls: str | None = Field(None, description="A PLS document with <alias> entries (or give entries).")
    language: str | None = Field(None, description="Default language of the entries; none = every language.")
    case_sensitive: bool = Field(False, description="Default case rule of the entries.")
