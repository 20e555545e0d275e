"""Wire models of the speech API, in OpenAI's field order, with our extensions after them.

The multipart forms (``VCForm``, ``VoiceUploadForm``) reuse the speech request's field definitions,
so every shared option has the same range, default and alias on every endpoint.

Unknown fields are ignored (the OpenAI SDK sends extensions through ``extra_body``). Ranges are
checked here (422 with the OpenAI error body); checks that need settings live in the serving class.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]
NormalizerMode = Literal["rule", "spoken", "llm"]
Language = Literal["auto", "en", "ms", "zh", "ta"]


class TextOptions(BaseModel):
    """How the input text is normalized before it reaches the LM (shared by every text endpoint)."""

    mode: NormalizerMode | None = Field(
        None, description="rule | spoken | llm; default DEFAULT_NORMALIZER_MODE."
    )
    normalize_malaysian: bool | None = Field(
        None, description="Malaysian entities in rule mode; default DEFAULT_NORMALIZE_MALAYSIAN."
    )
    language: Language = Field("auto", description="Language of the text; auto detects it per sentence.")
    prompt: str | None = Field(None, max_length=2000, description="Extra instructions for the llm mode.")


class VoiceRef(BaseModel):
    """OpenAI's object form of ``voice``: ``{"id": "..."}``."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(min_length=1, max_length=128)


class NormalizeRequest(TextOptions):
    """Body of ``POST /v1/audio/normalize``."""

    model_config = ConfigDict(extra="ignore")
    input: str = Field(min_length=1, description="Text to normalize (at most MAX_INPUT_CHARS).")


class NormalizeResponse(BaseModel):
    """The normalized text and the mode that produced it."""

    output: str
    mode: NormalizerMode


class SpeechRequest(BaseModel):
    """Body of ``POST /v1/audio/speech``."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = Field(None, description="tts-1, tts-1-hd, gpt-4o-mini-tts or MODEL_NAME.")
    input: str = Field(min_length=1, description="Text to speak (at most MAX_INPUT_CHARS).")
    voice: str | VoiceRef | None = Field(None, description="A voice, an alias, or {'id': voice}.")
    instructions: str | None = Field(None, max_length=4096, description="Accepted; has no effect.")
    response_format: ResponseFormat = Field(
        "pcm", description="pcm (24 kHz s16le mono), wav, mp3, opus (Ogg), aac (ADTS) or flac."
    )
    speed: float | None = Field(
        None,
        ge=0.5,
        le=2.0,
        validation_alias=AliasChoices("speed", "speaking_rate"),
        description="Speaking rate, pitch kept (alias speaking_rate); default DEFAULT_SPEAKING_RATE.",
    )
    stream_format: Literal["audio", "sse"] = Field(
        "audio", description="audio: raw bytes; sse: OpenAI speech.audio.delta/done events (when streaming)."
    )

    stream: bool = Field(True, description="Stream audio as it is generated, or return it whole.")
    temperature: float | None = Field(None, ge=0, le=2)
    repetition_penalty: float | None = Field(None, gt=0, le=2)
    max_tokens: int | None = Field(None, ge=1, le=32768, description="Speech tokens (50 per second).")
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=1)
    seed: int | None = Field(None, ge=0, le=2**63 - 1)
    playback_speed: float | None = Field(
        None, ge=0.02, le=60, description="Seconds of audio in the first decode window."
    )
    playback_overlap_speed: float | None = Field(
        None, ge=0, le=2, description="Seconds of future context per decode window."
    )
    stream_normalize: bool | None = Field(
        None, description="Loudness normalization; default STREAM_NORMALIZE."
    )
    mode: NormalizerMode | None = TextOptions.model_fields["mode"]
    normalize_malaysian: bool | None = TextOptions.model_fields["normalize_malaysian"]
    language: Language = TextOptions.model_fields["language"]
    prompt: str | None = TextOptions.model_fields["prompt"]
    interleave_id: str | None = Field(
        None,
        max_length=256,
        description="Turn history id shared by the requests of one reply (or header X-Interleave-Id; "
        "the body wins). See INTERLEAVE.md.",
    )
    max_retain_interleave: int | None = Field(
        None,
        ge=0,
        le=64,
        description="History turns in the prompt, 0 = no limit; default MAX_RETAIN_INTERLEAVE.",
    )

    def text_options(self) -> TextOptions:
        """The text-normalization fields of this request."""
        return TextOptions.model_validate(self, from_attributes=True)

    def voice_name(self) -> str | None:
        """The requested voice as a plain string (None = default)."""
        return self.voice.id if isinstance(self.voice, VoiceRef) else self.voice


_SPEECH = SpeechRequest.model_fields


class VCForm(BaseModel):
    """Form fields of ``POST /v1/audio/vc`` (the file ``reference_audio`` is a separate part)."""

    model_config = ConfigDict(extra="ignore")

    reference_text: str = Field(min_length=1, description="Transcript of the reference audio.")
    generate_text: str = Field(min_length=1, description="Text to speak in the reference voice.")
    model: str | None = _SPEECH["model"]
    response_format: ResponseFormat = _SPEECH["response_format"]
    temperature: float | None = _SPEECH["temperature"]
    repetition_penalty: float | None = _SPEECH["repetition_penalty"]
    max_tokens: int | None = _SPEECH["max_tokens"]
    stream: bool = _SPEECH["stream"]
    playback_speed: float | None = _SPEECH["playback_speed"]
    playback_overlap_speed: float | None = _SPEECH["playback_overlap_speed"]
    speed: float | None = _SPEECH["speed"]
    stream_format: Literal["audio", "sse"] = _SPEECH["stream_format"]
    top_p: float | None = _SPEECH["top_p"]
    top_k: int | None = _SPEECH["top_k"]
    seed: int | None = _SPEECH["seed"]
    stream_normalize: bool | None = _SPEECH["stream_normalize"]
    mode: NormalizerMode | None = _SPEECH["mode"]
    normalize_malaysian: bool | None = _SPEECH["normalize_malaysian"]
    language: Language = _SPEECH["language"]
    prompt: str | None = _SPEECH["prompt"]

    def text_options(self) -> TextOptions:
        """How both texts are normalized."""
        return TextOptions.model_validate(self, from_attributes=True)


class VoiceUploadForm(BaseModel):
    """Form fields of ``POST /v1/audio/voices`` (the file ``audio_sample`` is a separate part)."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, description="Voice name: 1-64 of A-Z a-z 0-9 _ -.")
    reference_text: str = Field(min_length=1, description="Transcript of the audio sample.")
    consent: str | None = Field(
        None, max_length=1024, description="Consent record of the speaker (stored, not checked)."
    )
    language: Language = _SPEECH["language"]
