"""The MOSS-TTS-Realtime family's settings (``MODEL_FAMILIES=...,moss``): its LM, batching, streaming,
voices and its codec (MOSS-Audio-Tokenizer).

A setting here is ``MOSS_`` + the words of the NeuCodec family's setting for the same thing where it
has one (``MOSS_DEVICE`` / ``DEVICE``, ``MOSS_MAX_BATCH`` / ``LM_MAX_BATCH``); renamed settings keep
their old names as aliases.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field

from app.core.settings import ServerSettings


class MossSettings(ServerSettings):
    """The MOSS-TTS-Realtime family (a Qwen3 backbone + local transformer over 16 codebooks)."""

    # --- LM ---------------------------------------------------------------------------------------------
    MOSS_TTS_MODEL: str = Field(
        "OpenMOSS-Team/MOSS-TTS-Realtime",
        description="MOSS-TTS-Realtime checkpoint: Hugging Face id or local directory (official layout).",
    )
    MOSS_MODEL_NAME: str = Field(
        "moss-tts-realtime",
        min_length=1,
        description="The model id this family answers to (also MOSS_TTS_MODEL when it is a Hub id).",
    )
    MOSS_DEVICE: str = Field(
        "",
        validation_alias=AliasChoices("MOSS_DEVICE", "MOSS_TTS_DEVICE"),
        description="Device of the MOSS LM and codec (cpu, cuda[:N], npu[:N]); empty = DEVICE (old name "
        "MOSS_TTS_DEVICE).",
    )
    MOSS_LM_DTYPE: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        validation_alias=AliasChoices("MOSS_LM_DTYPE", "MOSS_TTS_DTYPE"),
        description="MOSS LM weights dtype; auto: bf16 on cuda and npu and on a CPU with bf16 matrix "
        "instructions (AMX or AVX-512-BF16, as CODEC_DTYPE=auto), else float32 (old name MOSS_TTS_DTYPE).",
    )
    MOSS_LM_ATTENTION: Literal["auto", "sdpa", "eager"] = Field(
        "auto",
        validation_alias=AliasChoices("MOSS_LM_ATTENTION", "MOSS_TTS_ATTENTION"),
        description="MOSS LM attention; auto: sdpa on cuda and npu, the fastest exact one on cpu (old name "
        "MOSS_TTS_ATTENTION).",
    )
    MOSS_PREPACK: bool = Field(
        True,
        description="On a CPU, lay the linear weights of the MOSS LM and of the codec's decoder out once for "
        "oneDNN instead of on every call (the same outputs; not the encoder).",
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
    MOSS_PREFILL_CHUNK: int = Field(
        256,
        ge=1,
        description="MOSS LM: most prompt positions (over all rows of a group) prefilled between two steps.",
    )
    MOSS_CACHE_POSITIONS: int = Field(
        32768,
        ge=64,
        validation_alias=AliasChoices("MOSS_CACHE_POSITIONS", "MOSS_CACHE_ROWS"),
        description="MOSS LM cache budget in positions (batch rows x longest prompt+max_tokens); also caps "
        "one request's prompt + max_tokens (old name MOSS_CACHE_ROWS).",
    )
    MOSS_DEFAULT_MAX_TOKENS: int = Field(
        1500, ge=1, le=32768, description="MOSS frames per request when it sets no max_tokens (80 ms each)."
    )
    MOSS_REPETITION_WINDOW: int = Field(
        50, ge=1, le=1000, description="Past frames the MOSS repetition penalty looks at, per codebook."
    )
    MOSS_FIRST_CHUNK_FRAMES: int = Field(
        1,
        ge=1,
        le=64,
        description="Frames in the first MOSS decode (80 ms each): the first audio's size; 1 = as soon as "
        "the first frame exists.",
    )
    MOSS_MAX_CHUNK_FRAMES: int = Field(
        8, ge=1, le=64, description="Largest MOSS decode; chunk sizes double from the first up to it."
    )
    MOSS_DEADLINE_CUTS: bool = Field(
        True,
        description="Decode the frames that exist when the listener is about to run out of audio, whatever "
        "the next chunk size (an LM slower than twice real time); false: the doubling sizes only.",
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

    # --- codec ------------------------------------------------------------------------------------------
    MOSS_CODEC_MODEL: str = Field(
        "OpenMOSS-Team/MOSS-Audio-Tokenizer",
        description="MOSS-Audio-Tokenizer checkpoint: Hugging Face id or local directory (official layout).",
    )
    MOSS_CODEC_MAX_STREAMS: int = Field(
        16, ge=1, le=1024, description="Most MOSS codec streams open at once (~180 MB of fp32 state each)."
    )
    MOSS_REFERENCE_VOICES: bool = Field(
        True,
        validation_alias=AliasChoices("MOSS_REFERENCE_VOICES", "MOSS_VOICE_PROMPTS"),
        description="Load the MOSS codec encoder (887M parameters) for voice prompts from reference audio "
        "and registered voices; false = decode only (old name MOSS_VOICE_PROMPTS).",
    )
    MOSS_CODEC_DTYPE: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="MOSS codec transformers and stream state; auto: the decoder in bf16 on npu and on a "
        "CPU with bf16 matrix instructions (as CODEC_DTYPE=auto; 34 dB SNR vs fp32), else float32, the "
        "encoder in float32 (exact voice-prompt codes); float32 | bfloat16: both (quantizer fp32).",
    )
