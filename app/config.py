"""Settings: every environment variable the server reads, typed, validated and documented.

One ``Settings`` object is built by ``create_app`` (or by the caller, in tests) and handed down; no
module reads the environment on its own. ``.env_example`` lists every field (a test keeps them in step).
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.core import defaults
from app.core.types import NormalizerMode

OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "onyx",
    "nova", "sage", "shimmer", "verse", "marin", "cedar",
)  # fmt: skip

# OpenAI voice name -> house voice, by the register of the OpenAI voice (female names to idayu).
DEFAULT_VOICE_ALIASES = {
    name: ("idayu" if name in {"coral", "nova", "sage", "shimmer", "marin"} else "husein")
    for name in OPENAI_VOICES
}


def _csv(text: str) -> list[str]:
    """The non-empty, stripped items of a comma-separated list."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _split_csv(value: object) -> object:
    """A comma-separated string as its items; any other value as it is (pydantic validates it)."""
    return _csv(value) if isinstance(value, str) else value


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
    WORKERS: int = Field(
        1, ge=1, le=64, description="Processes `python -m app` starts, each with its own engine."
    )


class LMSettings(BaseSettings):
    """The speech-token LM: backend, model, timeouts, sampling defaults."""

    # --- LM backend -------------------------------------------------------------------------------------
    LM_BACKEND: Literal["http", "transformers"] = Field(
        "transformers", description="Speech-token source: vLLM over HTTP, or the LM in-process."
    )
    TTS_API: str = Field(
        "http://127.0.0.1:9093", description="vLLM base URL; /v1/completions is appended when missing."
    )
    TTS_API_KEY: str = Field("", description="Bearer token sent to vLLM when set.")
    MODEL_NAME: str = Field("TTS-model", description="The served model name (what vLLM calls the LM).")
    TTS_MODEL: str = Field(
        "Scicom-intl/Multilingual-Expressive-TTS-1.7B",
        description="Hugging Face id or local directory of the TTS LM (transformers backend).",
    )
    LM_DTYPE: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="Weights dtype of the in-process LM (auto: the checkpoint's own, its config's dtype; "
        "on a CPU without bf16 matrix instructions choose float32).",
    )
    LM_ATTENTION_FP32: bool = Field(
        False,
        description="In-process LM: compute attention in float32 while the rest runs in LM_DTYPE "
        "(the mitigation to try when bf16 attention costs naturalness, e.g. on Ascend).",
    )
    LM_CONNECT_TIMEOUT_S: float = Field(10.0, gt=0, description="Seconds to connect to the LM backend.")
    LM_FIRST_TOKEN_TIMEOUT_S: float = Field(
        30.0, gt=0, description="Seconds from request to the first speech token (queueing + prefill)."
    )
    LM_TOKEN_TIMEOUT_S: float = Field(10.0, gt=0, description="Longest allowed gap between LM events.")
    DISCONNECT_POLL_S: float = Field(
        0.25, gt=0, le=5, description="How often a request waiting for audio checks for a client disconnect."
    )

    # --- voices and sampling defaults -------------------------------------------------------------------
    DEFAULT_SPEAKER: str = Field("husein", description="Voice used when a request names none.")
    SPEAKERS: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["husein", "idayu"], description="Comma-separated voices the LM knows."
    )
    VOICE_ALIASES: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="alias=voice pairs or a JSON object; unset: the OpenAI voice names, mapped to SPEAKERS.",
    )
    DEFAULT_TEMPERATURE: float = Field(0.6, ge=0, le=2, description="Sampling temperature.")
    DEFAULT_REPETITION_PENALTY: float = Field(1.15, gt=0, le=2, description="Repetition penalty.")
    DEFAULT_MAX_TOKENS: int = Field(
        3072,
        ge=1,
        description="Speech tokens per generation (50 per second); a longer input is spoken in parts.",
    )
    MAX_INPUT_CHARS: int = Field(4096, ge=1, description="Longest accepted `input`, in characters.")
    MAX_SPOKEN_CHARS: int = Field(
        16384,
        ge=1,
        description="Longest text once normalized (numbers, dates and such read out), in characters (400).",
    )

    # --- the batched in-process LM (issue 18) -----------------------------------------------------------
    LM_BATCH_SIZE: int = Field(
        8, ge=1, le=256, description="In-process LM: most generations decoded together (1 = one at a time)."
    )
    LM_PREFILL_CHUNK: int = Field(
        256, ge=1, description="In-process LM: most prompt tokens prefilled between two decode steps."
    )
    LM_PREFILL_ROWS: int = Field(
        0,
        ge=0,
        le=256,
        description="In-process LM: prompts prefilled together in one group "
        "(0 = LM_BATCH_SIZE; 1 = one at a time).",
    )
    LM_BATCH_CACHE_TOKENS: int = Field(
        32768,
        ge=1,
        description="In-process LM: KV-cache budget in tokens (rows x longest prompt+max_tokens); "
        "a request beyond it waits for a row to finish.",
    )

    # --- long inputs (issue 18; README "Long inputs") ---------------------------------------------------
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


class CodecSettings(BaseSettings):
    """The codec: model, device, precision, batching, graphs; the stitcher's windows."""

    # --- codec ------------------------------------------------------------------------------------------
    CODEC_MODEL: str = Field(
        "neuphonic/neucodec", description="NeuCodec checkpoint: Hugging Face id or local directory."
    )
    DEVICE: str = Field("", description="cpu, cuda, cuda:N, npu, npu:N; empty = cuda if present, else cpu.")
    CODEC_DTYPE: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="Decoder weights dtype; auto: bf16 on CPUs with AMX/AVX-512-BF16 and NPUs, else float32.",
    )
    CODEC_THREADS: int = Field(0, ge=0, le=256, description="CPU threads for torch (0 = torch's default).")
    CODEC_BUCKETS: Annotated[list[int], NoDecode] = Field(
        default_factory=lambda: [64, 96, 128, 192, 256, 384, 512, 768, 1024],
        description="Decode window lengths in codes (context included), CSV or JSON; empty = natural.",
    )
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
    CUDA_GRAPHS: bool = Field(True, description="Replay the decoder as CUDA graphs (cuda only).")
    CUDA_GRAPH_BUCKETS: Annotated[list[int], NoDecode] = Field(
        default_factory=lambda: list(defaults.CUDA_GRAPH_BUCKETS),
        description="Batch sizes with a CUDA graph (CSV or JSON); a batch is padded up to the next one.",
    )
    CUDA_GRAPH_WARMUP: bool = Field(
        True, description="Capture every (graph batch size, bucket length) at startup, not on first use."
    )
    CUDA_GRAPH_MAX: int = Field(
        defaults.CUDA_GRAPH_MAX, ge=0, le=1024, description="Most CUDA graphs kept (startup + lazy)."
    )
    TORCH_COMPILE: bool = Field(
        False, description="torch.compile the decoder instead of CUDA graphs (inductor; also on CPU)."
    )

    CODEC_TF32: bool = Field(False, description="TF32 matrix products in the decoder (cuda only).")
    CODEC_BATCHING: Literal["auto", "on", "off"] = Field(
        "auto", description="Batch decode windows across streams; auto: on accelerators, not on a CPU."
    )
    CODEC_SCHEDULING: Literal["deadline", "fifo"] = Field(
        "deadline", description="Decode order: earliest play-out deadline first, or first come first served."
    )

    # --- MOSS codec (MOSS-Audio-Tokenizer, for the MOSS-TTS-Realtime family) ----------------------------
    MOSS_CODEC_MODEL: str = Field(
        "OpenMOSS-Team/MOSS-Audio-Tokenizer",
        description="MOSS-Audio-Tokenizer checkpoint: Hugging Face id or local directory (official layout).",
    )
    MOSS_CODEC_MAX_STREAMS: int = Field(
        16, ge=1, le=1024, description="Most MOSS codec streams open at once (~180 MB of fp32 state each)."
    )
    MOSS_VOICE_PROMPTS: bool = Field(
        True,
        description="Load the MOSS codec encoder (887M parameters) for voice prompts; false = decode only.",
    )
    MOSS_CODEC_DTYPE: Literal["float32", "bfloat16"] = Field(
        "float32",
        description="MOSS codec transformers and stream state (bf16: 33.9 dB SNR vs fp32; quantizer fp32).",
    )

    # --- streaming stitcher -----------------------------------------------------------------------------
    DEFAULT_PLAYBACK_SPEED: float = Field(
        defaults.DEFAULT_PLAYBACK_SPEED,
        ge=0.02,
        le=60,
        description="First decode window in seconds (x50 tokens).",
    )
    DEFAULT_PLAYBACK_OVERLAP_SPEED: float = Field(
        defaults.DEFAULT_PLAYBACK_OVERLAP_SPEED,
        ge=0,
        le=2,
        description="Future context per decode window in seconds.",
    )
    STREAM_CHUNK_GROWTH: float = Field(
        defaults.STREAM_CHUNK_GROWTH, ge=1, le=16, description="Window growth factor per step."
    )
    STREAM_MAX_CHUNK_S: float = Field(
        defaults.STREAM_MAX_CHUNK_S, gt=0, le=60, description="Cap on a grown window, in seconds."
    )
    STREAM_PAST_CONTEXT_S: float = Field(
        defaults.STREAM_PAST_CONTEXT_S,
        ge=0,
        le=30,
        description="Past context decoded with each window and sliced off.",
    )
    CROSSFADE_MS: float = Field(
        defaults.CROSSFADE_MS, ge=0, le=100, description="Raised-cosine crossfade at window joins."
    )
    STREAM_REDECODE_BUDGET: float = Field(
        defaults.STREAM_REDECODE_BUDGET,
        ge=0,
        le=4,
        description="Share of an utterance's codes that may be decoded twice: the last window spends it on "
        "past context.",
    )


class VoiceSettings(BaseSettings):
    """Voice conversion and registered voices."""

    VC_ENABLED: bool = Field(
        True,
        description="Load the NeuCodec encoder (600M semantic model) for /v1/audio/vc and voice uploads.",
    )
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
    # Scale-out (issue 20): where registered voices and encoded references are shared
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


class MossSettings(BaseSettings):
    """The MOSS-TTS-Realtime family (``MODEL_FAMILIES=...,moss``): its LM, streaming and voices.

    Its codec is the MOSS codec (``MOSS_CODEC_*`` in the codec settings)."""

    MOSS_TTS_MODEL: str = Field(
        "OpenMOSS-Team/MOSS-TTS-Realtime",
        description="MOSS-TTS-Realtime checkpoint: Hugging Face id or local directory (official layout).",
    )
    MOSS_MODEL_NAME: str = Field(
        "moss-tts-realtime",
        min_length=1,
        description="The model id this family answers to (also MOSS_TTS_MODEL when it is a Hub id).",
    )
    MOSS_TTS_DEVICE: str = Field(
        "", description="Device of the MOSS LM and codec (cpu, cuda[:N], npu[:N]); empty = DEVICE."
    )
    MOSS_TTS_DTYPE: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="MOSS LM weights dtype; auto: bf16 on cuda and npu, float32 on cpu."
    )
    MOSS_TTS_ATTENTION: Literal["auto", "sdpa", "eager"] = Field(
        "auto", description="MOSS LM attention; auto: sdpa on cuda and npu, the fastest exact one on cpu."
    )
    MOSS_MAX_BATCH: int = Field(
        8, ge=1, le=256, description="MOSS requests generated together in one batched LM step."
    )
    MOSS_PREFILL_ROWS: int = Field(
        0,
        ge=0,
        le=256,
        description=(
            "MOSS prompts prefilled together in one group (0 = MOSS_MAX_BATCH; 1 = one at a time: on a CPU "
            "a better median first audio, a worse worst case)."
        ),
    )
    MOSS_CACHE_ROWS: int = Field(
        32768,
        ge=64,
        description="MOSS LM cache budget in rows (batch rows x longest prompt+max_tokens); also caps one "
        "request's prompt + max_tokens.",
    )
    MOSS_DEFAULT_MAX_TOKENS: int = Field(
        1500, ge=1, le=32768, description="MOSS frames per request when it sets no max_tokens (80 ms each)."
    )
    MOSS_REPETITION_WINDOW: int = Field(
        50, ge=1, le=1000, description="Past frames the MOSS repetition penalty looks at, per codebook."
    )
    MOSS_FIRST_CHUNK_FRAMES: int = Field(
        2, ge=1, le=64, description="Frames in the first MOSS decode (80 ms each): the first audio's size."
    )
    MOSS_MAX_CHUNK_FRAMES: int = Field(
        8, ge=1, le=64, description="Largest MOSS decode; chunk sizes double from the first up to it."
    )
    MOSS_VOICES_DIR: str = Field(
        "",
        description="Directory of MOSS built-in voice clips (*.wav, voice name = file stem), encoded at "
        "startup; empty = none.",
    )
    MOSS_DEFAULT_VOICE: str = Field(
        "default",
        min_length=1,
        description="MOSS voice when a request names none: 'default' (no voice prompt) or a clip's stem.",
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
    LM_MAX_MODEL_LEN: int = Field(
        4096,
        ge=64,
        description="LM context window in tokens (vLLM --max-model-len); history is fitted to it.",
    )
    INTERLEAVE_MIN_GEN_TOKENS: int = Field(
        1000,
        ge=1,
        description="Generation room, in tokens, that history may never squeeze the new turn below.",
    )
    INTERLEAVE_FALLBACK: bool = Field(
        True, description="Regenerate once without history when the LM stops implausibly early with it."
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
    READY_TIMEOUT_S: float = Field(2.0, gt=0, le=30, description="Deadline of /ready's LM backend check.")
    SHUTDOWN_GRACE_S: float = Field(
        30.0, ge=0, le=600, description="On SIGTERM, how long in-flight responses may finish."
    )
    LOG_FORMAT: Literal["auto", "json", "text"] = Field(
        "auto", description="Log lines as JSON or plain text; auto: text on a terminal, JSON otherwise."
    )

    # --- first run: startup progress (issue 22) ------------------------------------------------------
    PROGRESS_INTERVAL_S: float = Field(
        5.0,
        gt=0,
        le=600,
        description="Seconds between progress lines of a download or load in JSON or a file (a terminal "
        "redraws one line in place).",
    )


class Settings(  # bases in reverse: pydantic lists the last base's fields first
    ObservabilitySettings,
    AudioSettings,
    InterleaveSettings,
    MossSettings,
    VoiceSettings,
    CodecSettings,
    TextSettings,
    LMSettings,
    ServingSettings,
):
    """Server configuration, read from the environment and an optional ``.env`` file.

    The fields come from one class per concern (above); their environment names are the public contract.
    """

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=True)

    @field_validator("LOG_LEVEL", mode="before")
    @classmethod
    def _lower_log_level(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("CODEC_BUCKETS", "CUDA_GRAPH_BUCKETS", mode="before")
    @classmethod
    def _parse_int_list(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [int(item) for item in _csv(text)]

    @field_validator("CODEC_BUCKETS", "CUDA_GRAPH_BUCKETS")
    @classmethod
    def _check_int_list(cls, value: list[int]) -> list[int]:
        if any(item < 1 for item in value):
            raise ValueError(f"every entry must be a positive integer, got {value}")
        return sorted(set(value))

    @field_validator("SPEAKERS", "MODEL_FAMILIES", mode="before")
    @classmethod
    def _parse_speakers(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("VOICE_ALIASES", mode="before")
    @classmethod
    def _parse_aliases(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("{"):
            return json.loads(text)
        pairs: dict[str, str] = {}
        for item in _csv(text):
            alias, sep, voice = item.partition("=")
            if not sep or not alias.strip() or not voice.strip():
                raise ValueError(f"VOICE_ALIASES entry {item!r} is not alias=voice")
            pairs[alias.strip()] = voice.strip()
        return pairs

    @model_validator(mode="after")
    def _check_voices(self) -> Settings:
        if not self.SPEAKERS:
            raise ValueError("SPEAKERS must name at least one voice")
        if self.DEFAULT_SPEAKER not in self.SPEAKERS:
            raise ValueError(
                f"DEFAULT_SPEAKER {self.DEFAULT_SPEAKER!r} is not one of SPEAKERS {self.SPEAKERS}"
            )
        if "VOICE_ALIASES" not in self.model_fields_set or not self.VOICE_ALIASES:
            self.VOICE_ALIASES = {
                alias: voice if voice in self.SPEAKERS else self.DEFAULT_SPEAKER
                for alias, voice in DEFAULT_VOICE_ALIASES.items()
            }
        if bool(self.OPENAI_BASE_URL) != bool(self.OPENAI_MODEL_NAME):
            raise ValueError(
                "the llm normalizer needs both OPENAI_BASE_URL and OPENAI_MODEL_NAME (or neither)"
            )
        if self.MIN_REFERENCE_S >= self.MAX_REFERENCE_S:
            raise ValueError("MIN_REFERENCE_S must be below MAX_REFERENCE_S")
        unknown = {a: v for a, v in self.VOICE_ALIASES.items() if v not in self.SPEAKERS}
        if unknown:
            raise ValueError(f"VOICE_ALIASES point at voices not in SPEAKERS: {unknown}")
        return self

    @model_validator(mode="after")
    def _check_interleave(self) -> Settings:
        if self.INTERLEAVE_MIN_GEN_TOKENS >= self.LM_MAX_MODEL_LEN:
            raise ValueError("INTERLEAVE_MIN_GEN_TOKENS must be below LM_MAX_MODEL_LEN")
        return self
