"""The NeuCodec family's settings: its LM (vLLM over HTTP or in-process), voices and sampling, the
batched in-process engine, its context window and interleave history, the NeuCodec codec and the
stitcher's windows.

Most names predate the family's own package and are kept as they were (the default family's settings
are unprefixed; the MOSS family's counterparts are ``MOSS_`` + the same words). Renamed settings keep
their old names as aliases.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import NoDecode

from app.core import defaults
from app.core.settings import ServerSettings, csv_items, parse_int_list, split_csv
from app.core.voices import OPENAI_VOICES

# OpenAI voice name -> house voice, by the register of the OpenAI voice (female names to idayu).
DEFAULT_VOICE_ALIASES = {
    name: ("idayu" if name in {"coral", "nova", "sage", "shimmer", "marin"} else "husein")
    for name in OPENAI_VOICES
}


class NeuCodecSettings(ServerSettings):
    """The NeuCodec family (``MODEL_FAMILIES=neucodec``, the default)."""

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

    # --- voices and sampling defaults -------------------------------------------------------------------
    DEFAULT_VOICE: str = Field(
        "husein",
        validation_alias=AliasChoices("DEFAULT_VOICE", "DEFAULT_SPEAKER"),
        description="Voice used when a request names none (old name DEFAULT_SPEAKER).",
    )
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

    # --- the batched in-process LM ----------------------------------------------------------------------
    LM_MAX_BATCH: int = Field(
        8,
        ge=1,
        le=256,
        validation_alias=AliasChoices("LM_MAX_BATCH", "LM_BATCH_SIZE"),
        description="In-process LM: most generations decoded together (1 = one at a time; old name "
        "LM_BATCH_SIZE).",
    )
    LM_PREFILL_CHUNK: int = Field(
        256, ge=1, description="In-process LM: most prompt tokens prefilled between two decode steps."
    )
    LM_PREFILL_ROWS: int = Field(
        0,
        ge=0,
        le=256,
        description="In-process LM: prompts prefilled together in one group "
        "(0 = LM_MAX_BATCH; 1 = one at a time).",
    )
    LM_CACHE_POSITIONS: int = Field(
        32768,
        ge=1,
        validation_alias=AliasChoices("LM_CACHE_POSITIONS", "LM_BATCH_CACHE_TOKENS"),
        description="In-process LM: KV-cache budget in positions (rows x longest prompt+max_tokens); "
        "a request beyond it waits for a row to finish (old name LM_BATCH_CACHE_TOKENS).",
    )

    # --- context window and interleave history ----------------------------------------------------------
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

    # --- codec ------------------------------------------------------------------------------------------
    REFERENCE_VOICES: bool = Field(
        True,
        validation_alias=AliasChoices("REFERENCE_VOICES", "VC_ENABLED"),
        description="Load the NeuCodec encoder (600M semantic model) for /v1/audio/vc and registered "
        "voices (old name VC_ENABLED).",
    )
    CODEC_MODEL: str = Field(
        "neuphonic/neucodec", description="NeuCodec checkpoint: Hugging Face id or local directory."
    )
    CODEC_DTYPE: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="Decoder weights dtype; auto: bf16 on CPUs with AMX/AVX-512-BF16 and NPUs, else float32.",
    )
    CODEC_BUCKETS: Annotated[list[int], NoDecode] = Field(
        default_factory=lambda: list(defaults.CODEC_BUCKETS),
        description="Decode window lengths in codes (context included), CSV or JSON; empty = natural.",
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
    CODEC_PREPACK: bool = Field(
        True,
        description="On a CPU, lay the decoder's linear and conv weights out once for oneDNN instead of on "
        "every call (not with TORCH_COMPILE, whose inductor does its own).",
    )
    CODEC_BATCHING: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Batch decode windows across streams; auto: on accelerators (windows of one length), "
        "and on a CPU windows of any lengths packed into one call while a batch holds at most "
        "CODEC_CPU_BATCH_CODES codes; on: windows of one length everywhere.",
    )
    CODEC_CPU_BATCH_CODES: int = Field(
        defaults.CODEC_CPU_BATCH_CODES,
        ge=1,
        le=100_000,
        description="CODEC_BATCHING=auto on a CPU: most codes in one packed decode batch (short windows "
        "batch, a longer one runs alone).",
    )
    CODEC_SCHEDULING: Literal["deadline", "fifo"] = Field(
        "deadline", description="Decode order: earliest play-out deadline first, or first come first served."
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

    STREAM_DEADLINE_CUTS: bool = Field(
        True,
        description="Cut a decode window at the codes that exist when its listener is about to run out of "
        "audio (an LM slower than the windows need); false: windows as the schedule plans them only.",
    )
    STREAM_CUT_MARGIN_S: float = Field(
        defaults.STREAM_CUT_MARGIN_S,
        ge=0,
        le=10,
        description="Audio a listener has left when its next window is cut short (at least 1.5 times the "
        "stream's last decode time).",
    )
    STREAM_FIRST_COVER: float = Field(
        defaults.STREAM_FIRST_COVER,
        ge=0,
        le=10,
        description="Windows fit the codec's load with this much to spare: the first window plays, and "
        "each window grows no further than, this many times the measured decode time of one round of "
        "every stream's next window; on a CPU a window joins a packed decode call only while the call, "
        "this many times its measured cost, ends before its most urgent window is due, or it is due by "
        "then itself (0: off, the configured schedule and any window joins).",
    )
    VIABILITY_MAX_FIRST_S: float = Field(
        defaults.VIABILITY_MAX_FIRST_S,
        gt=0,
        le=30,
        description="With VIABILITY_CHECK: one more stream is admitted while the first window that keeps "
        "every stream fed (STREAM_FIRST_COVER) need not be longer than this (seconds of audio).",
    )

    @field_validator("CODEC_BUCKETS", "CUDA_GRAPH_BUCKETS", mode="before")
    @classmethod
    def _parse_int_list(cls, value: object) -> object:
        return parse_int_list(value)

    @field_validator("CODEC_BUCKETS", "CUDA_GRAPH_BUCKETS")
    @classmethod
    def _check_int_list(cls, value: list[int]) -> list[int]:
        if any(item < 1 for item in value):
            raise ValueError(f"every entry must be a positive integer, got {value}")
        return sorted(set(value))

    @field_validator("SPEAKERS", mode="before")
    @classmethod
    def _parse_speakers(cls, value: object) -> object:
        return split_csv(value)

    @field_validator("VOICE_ALIASES", mode="before")
    @classmethod
    def _parse_aliases(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        text = value.strip()
        if text.startswith("{"):
            return json.loads(text)
        pairs: dict[str, str] = {}
        for item in csv_items(text):
            alias, sep, voice = item.partition("=")
            if not sep or not alias.strip() or not voice.strip():
                raise ValueError(f"VOICE_ALIASES entry {item!r} is not alias=voice")
            pairs[alias.strip()] = voice.strip()
        return pairs

    @model_validator(mode="after")
    def _check_neucodec(self) -> NeuCodecSettings:
        if not self.SPEAKERS:
            raise ValueError("SPEAKERS must name at least one voice")
        if self.DEFAULT_VOICE not in self.SPEAKERS:
            raise ValueError(f"DEFAULT_VOICE {self.DEFAULT_VOICE!r} is not one of SPEAKERS {self.SPEAKERS}")
        if "VOICE_ALIASES" not in self.model_fields_set or not self.VOICE_ALIASES:
            self.VOICE_ALIASES = {
                alias: voice if voice in self.SPEAKERS else self.DEFAULT_VOICE
                for alias, voice in DEFAULT_VOICE_ALIASES.items()
            }
        unknown = {a: v for a, v in self.VOICE_ALIASES.items() if v not in self.SPEAKERS}
        if unknown:
            raise ValueError(f"VOICE_ALIASES point at voices not in SPEAKERS: {unknown}")
        if self.INTERLEAVE_MIN_GEN_TOKENS >= self.LM_MAX_MODEL_LEN:
            raise ValueError("INTERLEAVE_MIN_GEN_TOKENS must be below LM_MAX_MODEL_LEN")
        return self
