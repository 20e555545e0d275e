"""The Engine: owns the codec, its worker thread, the speech-token source, the voice and turn stores.

Built once in the lifespan of ``create_app`` (``start``) and closed at shutdown (``close``); routes
reach it through ``request.app.state.engine``. Nothing here runs at import.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from app.audio.io import ReferenceAudio
from app.audio.stitcher import StitchSchedule
from app.codec.reference_cache import ReferenceCache
from app.config import Settings
from app.errors import InvalidRequest, Unavailable
from app.interleave.service import Interleave
from app.lm.types import TokenSource
from app.observability.metrics import Metrics
from app.registry import VoiceRegistry
from app.text.llm import LLMNormalizer
from app.text.normalizer import TextNormalizer
from app.voices import VoiceCatalog

if TYPE_CHECKING:
    from app.codec.precision import CodecPrecision
    from app.codec.worker import CodecOptions, CodecWorker

log = logging.getLogger(__name__)


def build_source(settings: Settings) -> TokenSource:
    """The speech-token source named by ``LM_BACKEND`` (imported here: torch/transformers load lazily)."""
    if settings.LM_BACKEND == "http":
        from app.lm.http_source import HttpTokenSource

        return HttpTokenSource(
            settings.TTS_API,
            settings.TTS_API_KEY,
            connect_timeout_s=settings.LM_CONNECT_TIMEOUT_S,
            first_token_timeout_s=settings.LM_FIRST_TOKEN_TIMEOUT_S,
            token_timeout_s=settings.LM_TOKEN_TIMEOUT_S,
        )
    from app.lm.transformers_source import TransformersTokenSource

    return TransformersTokenSource(settings.TTS_MODEL, settings.DEVICE, dtype=settings.LM_DTYPE)


def build_normalizer(settings: Settings) -> TextNormalizer:
    """The text normalizer; its llm mode only when OPENAI_BASE_URL and OPENAI_MODEL_NAME are set."""
    llm = None
    if settings.OPENAI_BASE_URL and settings.OPENAI_MODEL_NAME:
        llm = LLMNormalizer(
            settings.OPENAI_BASE_URL,
            settings.OPENAI_API_KEY,
            settings.OPENAI_MODEL_NAME,
            settings.OPENAI_TIMEOUT,
            skip_plain=settings.LLM_NORMALIZER_SKIP_PLAIN,
        )
    return TextNormalizer(llm, offload_chars=settings.NORMALIZE_OFFLOAD_CHARS)


def codec_options(settings: Settings) -> CodecOptions:
    """The codec batcher's settings (batching window and size, timeouts, graphs, compile)."""
    from app.codec.worker import CodecOptions

    return CodecOptions(
        window_s=settings.BATCH_WINDOW_MS / 1000,
        max_batch=settings.MAX_BATCH_SIZE,
        timeout_s=settings.BATCH_TIMEOUT,
        max_encode_batch=settings.MAX_ENCODE_BATCH,
        cuda_graphs=settings.CUDA_GRAPHS,
        graph_batch_sizes=tuple(settings.CUDA_GRAPH_BUCKETS),
        graph_lengths=tuple(settings.CODEC_BUCKETS) if settings.CUDA_GRAPH_WARMUP else (),
        max_graphs=settings.CUDA_GRAPH_MAX,
        compile=settings.TORCH_COMPILE,
        batching=settings.CODEC_BATCHING,
        deadlines=settings.CODEC_SCHEDULING == "deadline",
    )


@dataclass
class Engine:
    """Long-lived state of one server process."""

    settings: Settings
    voices: VoiceCatalog
    source: TokenSource
    normalizer: TextNormalizer
    registry: VoiceRegistry
    references: ReferenceCache
    interleave: Interleave
    codec: CodecWorker | None = None
    codec_precision: CodecPrecision | None = None  # what CODEC_DTYPE=auto chose, and why (issue 17)
    metrics: Metrics = field(default_factory=Metrics)  # the app's registry, set by create_app

    @classmethod
    def from_settings(cls, settings: Settings) -> Engine:
        voices = VoiceCatalog.from_settings(settings)
        registry = VoiceRegistry(Path(settings.VOICES_DIR), settings.MAX_REGISTERED_VOICES, voices.names())
        return cls(
            settings,
            voices,
            build_source(settings),
            build_normalizer(settings),
            registry,
            ReferenceCache(settings.REFERENCE_CACHE_SIZE),
            Interleave.from_settings(settings),
        )

    async def start(self) -> None:
        """Load the decoder (and the encoder when VC_ENABLED) off the event loop, start the codec
        worker, the LM source and read the registered voices."""
        import torch

        from app.codec.device import resolve_device
        from app.codec.neucodec.loading import load_decoder, load_encoder
        from app.codec.precision import choose_precision
        from app.codec.worker import CodecWorker
        from app.observability import tracing

        s = self.settings
        device = resolve_device(s.DEVICE)
        if device.type == "cpu" and s.CODEC_THREADS:
            torch.set_num_threads(s.CODEC_THREADS)
        precision = choose_precision(s.CODEC_DTYPE, device.type, tf32=s.CODEC_TF32)
        self.codec_precision = precision
        level = logging.WARNING if precision.slow else logging.INFO
        log.log(
            level,
            "loading codec %s on %s, precision %s: %s",
            s.CODEC_MODEL,
            device,
            precision.dtype,
            precision.reason,
        )
        decoder = await asyncio.to_thread(load_decoder, s.CODEC_MODEL, device)
        if precision.dtype != "float32":
            decoder.cast(precision.torch_dtype)
        if precision.tf32:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        encoder = None
        if s.VC_ENABLED:
            log.info("loading codec encoder %s on %s", s.CODEC_MODEL, device)
            encoder = await asyncio.to_thread(load_encoder, s.CODEC_MODEL, device)
        self.codec = CodecWorker(
            decoder,
            device,
            encoder=encoder,
            options=codec_options(s),
            observer=self.metrics,
            spans=tracing,  # the module's current_context/record_span: no-ops while spans are off
        )
        self.codec.start()
        await self.registry.load()
        log.info("starting LM source %s", self.source.name)
        await self.source.start()
        await self.interleave.start(self.source)
        if self.normalizer.llm is not None:
            await self.normalizer.llm.start()
        # the loudness stage's filter: imported now, not on the first request (about 2 s cold)
        await asyncio.to_thread(importlib.import_module, "scipy.signal")

    async def close(self) -> None:
        """Stop the LM source, the llm normalizer, the turn store and the codec worker; safe after a
        failed start."""
        await self.source.close()
        await self.interleave.close()
        if self.normalizer.llm is not None:
            await self.normalizer.llm.close()
        if self.codec is not None:
            await self.codec.close()
            self.codec = None

    async def ready(self) -> dict[str, bool]:
        """Readiness of each part: codec worker running, LM source able to start a generation."""
        return {"codec": self.codec is not None and self.codec.running, "lm": await self.source.ready()}

    def check_can_encode(self) -> None:
        """Raise before any upload is decoded when this server cannot encode reference audio."""
        if not self.settings.VC_ENABLED:
            raise InvalidRequest(
                "Voice conversion is disabled on this server (VC_ENABLED=false).", code="vc_disabled"
            )
        if self.codec is None:
            raise Unavailable("The codec is not loaded yet.")

    async def reference_codes(self, reference: ReferenceAudio) -> list[int]:
        """Speech codes of a decoded reference: from the cache, or encoded by the codec worker."""
        self.check_can_encode()
        assert self.codec is not None  # checked above
        return await self.references.get_or_encode(reference.digest, reference.samples, self.codec.encode)

    def schedule(self, playback_speed: float, playback_overlap_speed: float) -> StitchSchedule:
        """The stitcher schedule for one request."""
        s = self.settings
        return StitchSchedule.from_seconds(
            playback_speed=playback_speed,
            playback_overlap_speed=playback_overlap_speed,
            growth=s.STREAM_CHUNK_GROWTH,
            max_chunk_s=s.STREAM_MAX_CHUNK_S,
            past_context_s=s.STREAM_PAST_CONTEXT_S,
            crossfade_ms=s.CROSSFADE_MS,
            buckets=tuple(s.CODEC_BUCKETS),
        )
