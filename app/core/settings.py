"""The settings every family shares: the server, text, devices and codec batching, voices, interleave
stores, audio and observability.

Each model family adds its own settings class, a subclass of ``ServerSettings`` in its package
(``app/families/<name>/settings.py``); ``app.config.Settings`` is all of them composed, read from the
environment and an optional ``.env`` file. Environment names are the public contract: a renamed setting
keeps its old name as an alias. No module reads the environment on its own.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal, Self

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.core import defaults
from app.core.types import NormalizerMode


def csv_items(text: str) -> list[str]:
    """The non-empty, stripped items of a comma-separated list."""
    return [item.strip() for item in text.split(",") if item.strip()]


def split_csv(value: object) -> object:
    """A comma-separated string as its items; any other value as it is (pydantic validates it)."""
    return csv_items(value) if isinstance(value, str) else value


def parse_int_list(value: object) -> object:
    """A JSON list or comma-separated integers from the environment; any other value as it is."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        return json.loads(text)
    return [int(item) for item in csv_items(text)]


class ServingSettings(BaseSettings):
    """Serving: the HTTP server, admission, limits and shutdown."""

    HOST: str = Field("0.0.0.0", description="Address uvicorn binds to.")
    PORT: int = Field(9091, ge=1, le=65535, description="Port uvicorn listens on.")
    LOG_LEVEL: Literal["debug", "info", "warning", "error"] = Field(
        "info",
        validation_alias=AliasChoices("LOG_LEVEL", "LOGLEVEL"),
        description="Log level (LOGLEVEL is read too, any case).",
    )
    MODEL_FAMILIES: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["neucodec"],
        description="Model families loaded at startup (CSV); the first is the default (OpenAI model names).",
    )
    MAX_JSON_BODY_BYTES: int = Field(
        1048576, ge=1024, description="Largest request body of the non-upload routes; beyond it 413."
    )
    HEADER_READ_TIMEOUT_S: float = Field(
        10.0, gt=0, le=300, description="Time a connection has to send a request's headers (408, closed)."
    )
    BODY_READ_TIMEOUT_S: float = Field(
        30.0, gt=0, le=600, description="Longest wait for the next part of a request body (408, slot freed)."
    )
    WORKERS: int = Field(
        1, ge=1, le=64, description="Processes `python -m app` starts, each with its own engine."
    )
    MAX_HEADER_BYTES: int = Field(
        65536, ge=1024, le=16 * 1024 * 1024, description="Largest request line + headers of a request (431)."
    )
    WRITE_STALL_TIMEOUT_S: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="Longest a response may wait for a client that reads nothing (its socket buffers full); "
        "then the connection is closed and the stream's resources freed.",
    )

    DISCONNECT_POLL_S: float = Field(
        0.25, gt=0, le=5, description="How often a request waiting for audio checks for a client disconnect."
    )

    MAX_INPUT_CHARS: int = Field(4096, ge=1, description="Longest accepted `input`, in characters.")
    MAX_SPOKEN_CHARS: int = Field(
        16384,
        ge=1,
        description="Longest text once normalized (numbers, dates and such read out), in characters (400).",
    )


class LongInputSettings(BaseSettings):
    """Long inputs: how a text one generation cannot speak is cut into parts, and how they join."""

    LONG_INPUT_CHARS_PER_S: float = Field(
        10.0,
        gt=0,
        le=100,
        description="Long inputs: slowest expected speech, in characters per second of spaced scripts "
        "(spaces and punctuation included); a text is cut into generations that fit at this pace.",
    )
    LONG_INPUT_WIDE_CHARS_PER_S: float = Field(
        2.5, gt=0, le=100, description="Long inputs: the same for CJK (wide) characters per second."
    )
    LONG_INPUT_CROSSFADE_MS: float = Field(
        20.0,
        ge=0,
        le=200,
        description="Long inputs: equal-power crossfade where one part's audio joins the next.",
    )


class TextSettings(BaseSettings):
    """Text normalization."""

    DEFAULT_NORMALIZER_MODE: NormalizerMode = Field(
        "rule", description="Normalizer when a request names none: rule | spoken | llm."
    )
    DEFAULT_NORMALIZE_MALAYSIAN: bool = Field(
        False, description="Malaysian entity normalization in rule mode when a request does not say."
    )
    OPENAI_BASE_URL: str = Field(
        "", description="OpenAI-compatible base URL of the llm normalizer; empty = off."
    )
    OPENAI_API_KEY: str = Field("", description="Bearer token for the llm normalizer.")
    OPENAI_MODEL_NAME: str = Field("", description="Chat model of the llm normalizer.")
    OPENAI_TIMEOUT: float = Field(10.0, gt=0, le=120, description="Seconds for one llm normalizer call.")
    LLM_NORMALIZER_SKIP_PLAIN: bool = Field(
        True, description="Skip the llm call for text with nothing to normalize."
    )
    NORMALIZE_OFFLOAD_CHARS: int = Field(
        2000, ge=0, description="Texts longer than this are normalized in a worker thread."
    )
    # --- pronunciation lexicons and SSML (docs/pronunciation.md) ----------------------------------------
    LEXICON_PATH: str = Field(
        "",
        description="Server-wide lexicon: a .json or PLS (.pls, .xml) file, or a directory of them; "
        "applied after a request's and its voice's; empty = none.",
    )
    LEXICONS_DIR: str = Field(
        "", description="Directory of registered lexicons (VOICE_STORE=file); empty = VOICES_DIR/lexicons."
    )
    MAX_LEXICONS: int = Field(100, ge=0, description="Most lexicons that can be registered.")
    MAX_LEXICON_ENTRIES: int = Field(5000, ge=1, le=100_000, description="Most entries in one lexicon.")
    SSML_MAX_CHARS: int = Field(
        16384,
        ge=1,
        description="Longest SSML input, markup included (its text counts against MAX_INPUT_CHARS).",
    )
    SSML_MAX_DEPTH: int = Field(32, ge=1, le=256, description="Deepest nesting of SSML elements.")
    SSML_MAX_ELEMENTS: int = Field(1024, ge=1, description="Most elements in one SSML document.")
    SSML_MAX_BREAKS: int = Field(100, ge=0, description="Most <break> elements in one SSML document.")
    SSML_MAX_BREAK_S: float = Field(
        60.0,
        ge=0,
        le=3600,
        description="Longest total silence of the breaks of one SSML document, in seconds.",
    )


class DeviceSettings(BaseSettings):
    """The device every family runs on unless it names its own, and how codec work is batched."""

    DEVICE: str = Field("", description="cpu, cuda, cuda:N, npu, npu:N; empty = cuda if present, else cpu.")
    CODEC_THREADS: int = Field(0, ge=0, le=256, description="CPU threads for torch (0 = torch's default).")
    BATCH_WINDOW_MS: float = Field(
        defaults.BATCH_WINDOW_MS,
        ge=0,
        le=100,
        description="How long the batcher gathers more windows after the first.",
    )
    MAX_BATCH_SIZE: int = Field(
        defaults.MAX_BATCH_SIZE, ge=1, le=256, description="Most windows decoded in one batch."
    )
    BATCH_TIMEOUT: float = Field(
        defaults.BATCH_TIMEOUT_S,
        gt=0,
        le=600,
        description="Longest wait of one decode or encode for the device (503 past it).",
    )
    MAX_ENCODE_BATCH: int = Field(
        defaults.MAX_ENCODE_BATCH, ge=1, le=64, description="Most reference clips encoded in one batch."
    )


class VoiceSettings(BaseSettings):
    """Voice conversion and registered voices."""

    MAX_UPLOAD_BYTES: int = Field(
        20 * 1024 * 1024, ge=1024, description="Largest accepted audio upload (413)."
    )
    MIN_REFERENCE_S: float = Field(1.0, ge=0.1, le=10, description="Shortest accepted reference audio.")
    MAX_REFERENCE_S: float = Field(30.0, gt=0, le=120, description="Longest accepted reference audio.")
    REFERENCE_CACHE_SIZE: int = Field(
        256,
        ge=0,
        description="Encoded references kept (LRU, by audio content hash) in each process and in the "
        "shared store (files or Redis); 0 = no cache.",
    )
    VOICES_DIR: str = Field("voices", description="Directory of registered voices (one JSON file each).")
    MAX_REGISTERED_VOICES: int = Field(100, ge=0, description="Most voices that can be registered.")
    # scale-out: where registered voices and encoded references are shared
    VOICE_STORE: Literal["file", "redis"] = Field(
        "file",
        description="Registered voices and encoded references: file (VOICES_DIR, shared by one host's "
        "workers) or redis (REDIS_URL, shared by every replica).",
    )
    REDIS_KEY_PREFIX: str = Field(
        "tts:", description="Prefix of every Redis key the server writes (voices, references, turns)."
    )
    SHARED_REFERENCE_TTL_S: float = Field(
        86400.0, gt=0, description="VOICE_STORE=redis: encoded references are shared this long after use."
    )
    UPLOAD_DECODE_THREADS: int = Field(
        2, ge=1, le=64, description="Threads that decode uploaded audio (their own pool, not the shared one)."
    )
    UPLOAD_DECODE_TIMEOUT_S: float = Field(
        10.0, gt=0, le=300, description="Longest one upload decode may take (400) or wait for a thread (503)."
    )


class InterleaveSettings(BaseSettings):
    """Interleaved generation (INTERLEAVE.md)."""

    INTERLEAVE_STORE: Literal["shm", "redis", "memory", "off"] = Field(
        "shm",
        description="Turn store of interleave ids: shm (files, shared by the host's workers), redis "
        "(shared by hosts), memory (one process) or off (ignore interleave ids).",
    )
    INTERLEAVE_STORE_DIR: str = Field(
        "",
        description="shm store directory; empty = /dev/shm/tts-interleave (else <tmp>/tts-interleave).",
    )
    INTERLEAVE_TTL_S: float = Field(
        600.0, gt=0, description="An interleave id is forgotten this many seconds after its last turn."
    )
    MAX_RETAIN_INTERLEAVE: int = Field(
        5, ge=0, le=64, description="History turns per id when a request sets none; 0 = no turn limit."
    )
    INTERLEAVE_MAX_S: float = Field(
        20.0, gt=0, le=600, description="Seconds of history speech (x50 tokens) in one prompt."
    )
    REDIS_URL: str = Field("redis://127.0.0.1:6379/0", description="Redis of the redis stores.")


class AudioSettings(BaseSettings):
    """Audio out: speaking rate, loudness, fade-in."""

    DEFAULT_SPEAKING_RATE: float = Field(
        1.0, ge=0.5, le=2.0, description="Speaking rate (WSOLA, pitch kept) when a request sets none."
    )
    STREAM_NORMALIZE: bool = Field(True, description="Loudness-normalize each utterance (one locked gain).")
    TARGET_LOUDNESS_LUFS: float = Field(
        defaults.TARGET_LOUDNESS_LUFS,
        ge=-40,
        le=-3,
        validation_alias=AliasChoices("TARGET_LOUDNESS_LUFS", "TARGET_RMS_DB"),
        description="Target loudness: K-weighted, gated (BS.1770-style), in LUFS (old name TARGET_RMS_DB).",
    )
    MAX_GAIN_DB: float = Field(
        defaults.MAX_GAIN_DB, ge=0, le=40, description="Largest boost or cut the normalizer applies."
    )
    NORM_LOCK_S: float = Field(
        defaults.NORM_LOCK_S, gt=0, le=10, description="Seconds of voiced audio after which the gain locks."
    )
    NORM_MIN_ESTIMATE_S: float = Field(
        defaults.NORM_MIN_ESTIMATE_S,
        ge=0,
        le=5,
        description="Audio the first gain estimate needs (held back when the first window is shorter).",
    )
    FADE_IN_MS: float = Field(
        defaults.FADE_IN_MS, ge=0, le=200, description="Raised-cosine fade-in at the start of each response."
    )


class ObservabilitySettings(BaseSettings):
    """Observability and operations: spans, metrics, logs, API keys, admission."""

    ENABLE_TRACING_SPANS: bool = Field(
        True, description="Hot-path spans; built only when an exporter is configured too (OBSERVABILITY.md)."
    )
    TRACING_SPANS_REQUIRE_EXPORTER: bool = Field(
        True, description="Build no spans unless an exporter is configured; false if one is attached in code."
    )
    TRACE_ASGI_MESSAGE_SPANS: bool = Field(
        False, description="Keep OpenTelemetry's per-ASGI-message http receive/send spans."
    )
    OTLP_ENDPOINT: str = Field("", description="OTLP/HTTP collector (http://host:4318); opens the span gate.")
    OTEL_EXPORTER_OTLP_ENDPOINT: str = Field(
        "", description="Standard OTLP base URL; used like OTLP_ENDPOINT."
    )
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: str = Field(
        "", description="Standard OTLP traces URL, used as given; wins over the base URLs."
    )
    ENABLE_CONSOLE_SPAN_EXPORTER: bool = Field(False, description="Print finished spans to stdout.")
    SERVICE_NAME: str = Field("tts-api", min_length=1, description="service.name of the spans.")
    TRACING_SAMPLE: float = Field(
        1.0, ge=0, le=1, description="Head sampling ratio of new traces (parent-based)."
    )
    API_KEYS: str = Field(
        "", description="Comma-separated API keys, or a file of keys (one a line); empty = any key."
    )
    ADMIN_API_KEYS: str = Field(
        "",
        description="Admin keys (as API_KEYS; accepted wherever an API key is): may also delete any "
        "registered voice. Needs API_KEYS.",
    )
    MAX_CONCURRENT_STREAMS: int = Field(
        64, ge=0, description="Synthesis responses served at once; 0 = no limit."
    )
    MAX_QUEUED_STREAMS: int = Field(
        64, ge=0, description="Requests that may wait for a stream slot; beyond it 429."
    )
    QUEUE_WAIT_S: float = Field(10.0, ge=0, le=300, description="Longest wait for a slot before a 429.")
    VIABILITY_CHECK: bool = Field(
        True,
        description="Admit a new stream only while every stream can stay ahead of real time at the measured "
        "codec cost and LM rate (else wait VIABILITY_WAIT_S, then 429).",
    )
    VIABILITY_LM_FLOOR: float = Field(
        0.8,
        ge=0,
        le=10,
        description="Share of real time each stream's LM must keep (seconds of audio it makes a second).",
    )
    VIABILITY_WAIT_S: float = Field(
        3.0, ge=0, le=300, description="Longest wait for room at the measured rates before a 429."
    )
    READY_TIMEOUT_S: float = Field(2.0, gt=0, le=30, description="Deadline of /ready's LM backend check.")
    SHUTDOWN_GRACE_S: float = Field(
        30.0, ge=0, le=600, description="On SIGTERM, how long in-flight responses may finish."
    )
    LOG_FORMAT: Literal["auto", "json", "text"] = Field(
        "auto", description="Log lines as JSON or plain text; auto: text on a terminal, JSON otherwise."
    )

    # --- first run: startup progress ----------------------------------------------------------------
    PROGRESS_INTERVAL_S: float = Field(
        5.0,
        gt=0,
        le=600,
        description="Seconds between progress lines of a download or load in JSON or a file (a terminal "
        "redraws one line in place).",
    )


class RealtimeSettings(BaseSettings):
    """Realtime sessions over WebSocket (docs/realtime.md): their limits and timeouts."""

    REALTIME_MAX_SESSIONS: int = Field(
        64, ge=0, description="Realtime connections open at once in this process; 0 = realtime off."
    )
    REALTIME_MAX_SESSIONS_PER_KEY: int = Field(
        16, ge=1, description="Realtime connections one API key (tenant) may hold open at once."
    )
    REALTIME_MAX_CONTEXTS: int = Field(
        8, ge=1, le=256, description="Contexts (turns) one connection may have open at once."
    )
    REALTIME_MAX_CONTEXT_CHARS: int = Field(
        20000, ge=1, description="Characters of text one context may receive in all."
    )
    REALTIME_MAX_MESSAGE_BYTES: int = Field(
        65536,
        ge=256,
        description="Largest message a client may send; beyond it an error (the connection stays).",
    )
    REALTIME_IDLE_TIMEOUT_S: float = Field(
        300.0, gt=0, description="A connection with no open context and no message for this long is closed."
    )
    REALTIME_INPUT_TIMEOUT_S: float = Field(
        30.0, gt=0, description="A context whose input has not ended and got no text for this long fails."
    )
    REALTIME_TURN_TIMEOUT_S: float = Field(
        600.0, gt=0, description="Longest life of one context, first message to its last audio."
    )
    REALTIME_SEND_TIMEOUT_S: float = Field(
        10.0, gt=0, description="A client that takes no message for this long is disconnected (write stall)."
    )


class ServerSettings(  # bases in reverse: pydantic lists the last base's fields first
    RealtimeSettings,
    ObservabilitySettings,
    AudioSettings,
    InterleaveSettings,
    VoiceSettings,
    DeviceSettings,
    TextSettings,
    LongInputSettings,
    ServingSettings,
):
    """The shared settings: what every family's settings class builds on."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=True)

    @classmethod
    def of(cls, settings: ServerSettings) -> Self:
        """``settings`` as this class (a family's view of the composed settings); TypeError when this
        class is not part of them (its family is not registered)."""
        if not isinstance(settings, cls):
            raise TypeError(
                f"{type(settings).__name__} does not hold {cls.__name__}: is its family registered?"
            )
        return settings

    @field_validator("LOG_LEVEL", mode="before")
    @classmethod
    def _lower_log_level(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("MODEL_FAMILIES", mode="before")
    @classmethod
    def _parse_families(cls, value: object) -> object:
        return split_csv(value)

    @model_validator(mode="after")
    def _check_shared(self) -> ServerSettings:
        if bool(self.OPENAI_BASE_URL) != bool(self.OPENAI_MODEL_NAME):
            raise ValueError(
                "the llm normalizer needs both OPENAI_BASE_URL and OPENAI_MODEL_NAME (or neither)"
            )
        if self.MIN_REFERENCE_S >= self.MAX_REFERENCE_S:
            raise ValueError("MIN_REFERENCE_S must be below MAX_REFERENCE_S")
        return self


def env_names(settings: type[BaseSettings]) -> set[str]:
    """Every environment name ``settings`` reads: each field's name and its aliases (old names)."""
    names: set[str] = set()
    for name, info in settings.model_fields.items():
        names.add(name)
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names.update(choice for choice in alias.choices if isinstance(choice, str))
    return names
