"""NeuCodecFamily: the speech-token LM (vLLM over HTTP or in-process), the stitcher and the codec.

Owns the LM source, the codec worker (decoder, and the encoder when REFERENCE_VOICES), the reference-code
cache and the interleave service, all built from ``Settings`` and started in ``start``. ``plan`` turns a
``SpeechJob`` into a ``NeuCodecUtterance`` (``utterance.py``): the prompt, with interleave history when
asked, and for a text that one generation cannot speak, the parts it is cut into
(``app.families.shared.long_input``: codes at 50 per second against ``max_tokens`` and the room the prompt
leaves in LM_MAX_MODEL_LEN; with interleave, history may take the window down to
INTERLEAVE_MIN_GEN_TOKENS of room, so that is a bound too).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from app.audio.round_cost import RoundCost
from app.audio.splice import width_samples
from app.audio.stitcher import DeadlineCuts, StitchSchedule
from app.codec.reference_cache import ReferenceCache
from app.core.constants import TOKENS_PER_SECOND
from app.core.errors import InvalidRequest, Unavailable
from app.core.family import (
    Capabilities,
    ContextWindow,
    ReferenceFormat,
    ReferenceVoice,
    Sampling,
    SpeechJob,
    StreamJob,
)
from app.core.voices import VoiceCatalog
from app.families.neucodec.history.conversation import Conversations
from app.families.neucodec.lm.types import GenerationParams, TokenSource
from app.families.neucodec.prompt import tts_prompt, vc_prompt
from app.families.neucodec.settings import NeuCodecSettings
from app.families.neucodec.speech_tokens import SPEECH_CODES
from app.families.neucodec.stream import NeuCodecStream
from app.families.neucodec.utterance import NeuCodecUtterance, PlannedPart
from app.families.shared.lifecycle import Running, warm_post_stages
from app.families.shared.long_input import Budget, cut_into_parts, part_seed
from app.interleave.service import Interleave
from app.observability.metrics import Metrics
from app.observability.startup import startup_step

if TYPE_CHECKING:
    from app.codec.precision import CodecPrecision
    from app.codec.shared_codes import FileSharedCodes, RedisSharedCodes
    from app.families.neucodec.codec.worker import CodecOptions, CodecWorker

log = logging.getLogger(__name__)

NAME = "neucodec"
MIN_ROOM_TOKENS = 50
"""Fewest speech tokens (1 s) a prompt must leave in the LM window to be worth generating."""


class Prompt(NamedTuple):
    """A part's LM prompt and its length in LM tokens."""

    text: str
    tokens: int


def stitch_schedule(
    settings: NeuCodecSettings, first_chunk_s: float, overlap_s: float, buckets: tuple[int, ...] | None = None
) -> StitchSchedule:
    """The stitcher schedule the settings give a request (``buckets``: CODEC_BUCKETS unless given)."""
    s = settings
    return StitchSchedule.from_seconds(
        playback_speed=first_chunk_s,
        playback_overlap_speed=overlap_s,
        growth=s.STREAM_CHUNK_GROWTH,
        max_chunk_s=s.STREAM_MAX_CHUNK_S,
        past_context_s=s.STREAM_PAST_CONTEXT_S,
        crossfade_ms=s.CROSSFADE_MS,
        buckets=tuple(s.CODEC_BUCKETS) if buckets is None else buckets,
        redecode_budget=s.STREAM_REDECODE_BUDGET,
        cuts=DeadlineCuts(min_margin_s=s.STREAM_CUT_MARGIN_S) if s.STREAM_DEADLINE_CUTS else None,
    )


def builtin_voices(settings: NeuCodecSettings) -> VoiceCatalog:
    """The voices the LM was trained on (SPEAKERS), the default one and the aliases."""
    return VoiceCatalog(tuple(settings.SPEAKERS), settings.DEFAULT_VOICE, dict(settings.VOICE_ALIASES))


def build_source(settings: NeuCodecSettings) -> TokenSource:
    """The speech-token source named by ``LM_BACKEND`` (imported here: torch/transformers load lazily);
    in-process, ``LM_MAX_BATCH`` generations decode together (1: one at a time)."""
    if settings.LM_BACKEND == "http":
        from app.families.neucodec.lm.http_source import HttpTokenSource

        return HttpTokenSource(
            settings.TTS_API,
            settings.TTS_API_KEY,
            connect_timeout_s=settings.LM_CONNECT_TIMEOUT_S,
            first_token_timeout_s=settings.LM_FIRST_TOKEN_TIMEOUT_S,
            token_timeout_s=settings.LM_TOKEN_TIMEOUT_S,
        )
    from app.families.neucodec.lm.transformers_source import TransformersTokenSource

    return TransformersTokenSource(
        settings.TTS_MODEL,
        settings.DEVICE,
        dtype=settings.LM_DTYPE,
        attention_fp32=settings.LM_ATTENTION_FP32,
        batch_size=settings.LM_MAX_BATCH,
        prefill_chunk=settings.LM_PREFILL_CHUNK,
        prefill_rows=settings.LM_PREFILL_ROWS or None,
        cache_tokens=settings.LM_CACHE_POSITIONS,
    )


def shared_codes(settings: NeuCodecSettings) -> RedisSharedCodes | FileSharedCodes | None:
    """Encoded references shared with the other processes in the voice store: Redis (every replica) or
    ``VOICES_DIR/.references/neucodec`` (one host's workers); none when REFERENCE_CACHE_SIZE is 0."""
    if settings.REFERENCE_CACHE_SIZE == 0:
        return None
    from app.codec.shared_codes import shared_codes_for  # imports redis: only when it is used

    return shared_codes_for(settings, NAME)


def codec_options(settings: NeuCodecSettings) -> CodecOptions:
    """The codec batcher's settings (batching window and size, timeouts, graphs, compile)."""
    from app.families.neucodec.codec.worker import CodecOptions

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
        cpu_batch_codes=settings.CODEC_CPU_BATCH_CODES,
        cover=settings.STREAM_FIRST_COVER,
        deadlines=settings.CODEC_SCHEDULING == "deadline",
        warmup_lengths=WARMUP_LENGTHS,
    )


def prepacks_codec(settings: NeuCodecSettings, device_kind: str) -> bool:
    """Whether the decoder's weights are laid out once for oneDNN (CODEC_PREPACK): on a CPU only, and not
    under TORCH_COMPILE, whose inductor lays them out itself."""
    return settings.CODEC_PREPACK and device_kind == "cpu" and not settings.TORCH_COMPILE


WARMUP_LENGTHS = (20, 64)
"""Codes of the codec's startup decodes: a first window's and a longer one, the two points the decode cost
(``app.observability.capacity.DecodeCost``) starts from."""


class NeuCodecFamily:
    """The Qwen3 speech-token LM + NeuCodec family."""

    name = NAME
    capabilities = Capabilities(reference_voice=True, multi_turn=True)
    reference = ReferenceFormat(rate=16_000, codebooks=1, needs_transcript=True)  # NeuCodec's encoder input

    def __init__(self, settings: NeuCodecSettings, interleave: Interleave, metrics: Metrics) -> None:
        self.settings = settings
        self.voices = builtin_voices(settings)
        self.defaults = Sampling(
            max_tokens=settings.DEFAULT_MAX_TOKENS,
            temperature=settings.DEFAULT_TEMPERATURE,
            repetition_penalty=settings.DEFAULT_REPETITION_PENALTY,
        )
        self.source = build_source(settings)
        self.shared_codes = shared_codes(settings)
        self.references = ReferenceCache(
            settings.REFERENCE_CACHE_SIZE, shared=self.shared_codes, code_values=SPEECH_CODES
        )
        self.conversations = Conversations(settings, interleave)
        self.metrics = metrics
        self.codec: CodecWorker | None = None
        self.codec_precision: CodecPrecision | None = None  # what CODEC_DTYPE=auto chose, and why
        self.accelerator = False  # the codec runs on an accelerator (cuda, npu): windows take CODEC_BUCKETS
        self.codec_prepacked = False  # the decoder's weights laid out once for the CPU (CODEC_PREPACK)
        self.cpu_threads: int | None = None  # torch's intra-op threads on a CPU (CODEC_THREADS)
        self.running = Running()

    def model_ids(self) -> Sequence[str]:
        return (self.settings.MODEL_NAME,)

    async def start(self) -> None:
        """Load the decoder (and the encoder when REFERENCE_VOICES) off the event loop, start the codec
        worker,
        the LM source and the interleave store."""
        import torch

        from app.codec.precision import choose_precision
        from app.codec.prepack import prepack_for_cpu
        from app.core.device import resolve_device
        from app.families.neucodec.codec.loading import load_decoder, load_encoder
        from app.families.neucodec.codec.worker import CodecWorker
        from app.observability import tracing

        s = self.settings
        async with startup_step("DEVICE", s.DEVICE, "device"):
            device = resolve_device(s.DEVICE)
        self.accelerator = device.type != "cpu"
        if device.type == "cpu":
            if s.CODEC_THREADS:
                torch.set_num_threads(s.CODEC_THREADS)
            self.cpu_threads = torch.get_num_threads()
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
        async with startup_step("CODEC_MODEL", s.CODEC_MODEL, "codec decoder"):
            decoder = await asyncio.to_thread(load_decoder, s.CODEC_MODEL, device)
        if precision.dtype != "float32":
            decoder.cast(precision.torch_dtype)
        if prepacks_codec(s, device.type):  # after the cast: the packed weights keep their dtype
            report = await asyncio.to_thread(prepack_for_cpu, decoder, "codec decoder")
            self.codec_prepacked = report.packed > 0
        if precision.tf32:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        encoder = None
        if s.REFERENCE_VOICES:
            log.info("loading codec encoder %s on %s", s.CODEC_MODEL, device)
            async with startup_step("CODEC_MODEL", s.CODEC_MODEL, "codec encoder"):
                encoder = await asyncio.to_thread(load_encoder, s.CODEC_MODEL, device)
        codec = CodecWorker(
            decoder,
            device,
            encoder=encoder,
            options=codec_options(s),
            observer=self.metrics,
            spans=tracing,  # the module's current_context/record_span: no-ops while spans are off
            decoded=self.metrics.observe_decoded,
            cost=lambda: self.metrics.capacity.cost.line,
        )
        codec.start()
        self.codec = codec
        self.running.add("codec", self._close_codec)
        rules = self.metrics.capacity.rules
        rules.append(self.admits)
        self.running.add("viability rule", self._forget_rule)
        log.info("starting LM source %s", self.source.name)
        lm_setting = "TTS_MODEL" if s.LM_BACKEND == "transformers" else "TTS_API"
        self.running.add("LM source", self.source.close)  # closing one that did not start is safe
        async with startup_step(lm_setting, getattr(s, lm_setting), "LM"):
            await self.source.start()
        if s.LM_BACKEND == "http" and not await self.source.ready():
            log.warning(
                "the LM backend at TTS_API=%s does not answer yet: until it does, speech requests fail with "
                "502 (504 when its connection times out) and /ready answers 503",
                s.TTS_API,
            )
        await self.conversations.start(self.source)
        self.running.add("interleave store", self.conversations.close)
        if self.shared_codes is not None:
            await self.shared_codes.start()
            self.running.add("shared references", self.shared_codes.close)
        await warm_post_stages()

    async def close(self) -> None:
        """Stop what started, the last first (the shared references, the interleave store, the LM source,
        the codec worker); safe after a failed start."""
        await self.running.close()

    async def _forget_rule(self) -> None:
        self.metrics.capacity.rules.remove(self.admits)

    async def _close_codec(self) -> None:
        codec, self.codec = self.codec, None
        if codec is not None:
            await codec.close()

    def context_window(self) -> ContextWindow:
        """The LM window (LM_MAX_MODEL_LEN) and the room history always leaves a new turn."""
        return ContextWindow(self.settings.LM_MAX_MODEL_LEN, self.settings.INTERLEAVE_MIN_GEN_TOKENS)

    def details(self) -> dict[str, object]:
        """The codec's precision (what CODEC_DTYPE chose, and why), whether its weights are prepacked and,
        on a CPU, torch's intra-op threads."""
        if self.codec_precision is None:
            return {}
        codec = {**self.codec_precision.detail(), "prepacked": self.codec_prepacked}
        if self.cpu_threads is not None:
            codec["threads"] = self.cpu_threads
        return {"codec": codec}

    async def ready(self) -> dict[str, bool]:
        """Codec worker running, LM source able to start a generation."""
        return {"codec": self.codec is not None and self.codec.running, "lm": await self.source.ready()}

    def check_can_encode(self) -> None:
        if not self.settings.REFERENCE_VOICES:
            raise InvalidRequest(
                "Voice conversion is disabled on this server (REFERENCE_VOICES=false).", code="vc_disabled"
            )
        if self.codec is None:
            raise Unavailable("The codec is not loaded yet.")

    async def encode_reference(self, samples: np.ndarray, digest: str) -> list[int]:
        """Speech codes of a 16 kHz reference: from the cache, or encoded by the codec worker."""
        self.check_can_encode()
        assert self.codec is not None  # checked above
        return await self.references.get_or_encode(digest, samples, self.codec.encode)

    def load(self, streams: int, cover: float) -> RoundCost | None:
        """A codec round of ``streams`` streams at the measured decode cost, kept ``cover`` times over; None
        before the codec decoded anything, or with ``cover`` 0."""
        line = self.metrics.capacity.cost.line
        if line is None or cover <= 0:
            return None
        return RoundCost(line[0], line[1], max(1, streams), cover)

    def schedule(self, first_chunk_s: float, overlap_s: float) -> StitchSchedule:
        """The stitcher schedule for one request; its windows are fitted to ``round_load`` as it goes.
        On a CPU windows keep their natural lengths (CODEC_BUCKETS serve the graphs of an accelerator:
        on a CPU windows of any lengths share a batch, packed, and a window grown to a bucket only costs
        decode time)."""
        return stitch_schedule(self.settings, first_chunk_s, overlap_s, None if self.accelerator else ())

    def round_load(self) -> RoundCost | None:
        """A codec round of the streams served now at the measured decode cost (STREAM_FIRST_COVER)."""
        return self.load(self.metrics.capacity.streams, self.settings.STREAM_FIRST_COVER)

    def admits(self, streams: int) -> bool:
        """The viability rule: at the measured decode cost, ``streams`` streams keep fed with a first window
        of at most VIABILITY_MAX_FIRST_S (the default schedule, STREAM_FIRST_COVER; at least 1 when that is
        0). True before the codec decoded anything."""
        s = self.settings
        load = self.load(streams, max(1.0, s.STREAM_FIRST_COVER))
        if load is None:
            return True
        schedule = stitch_schedule(s, s.DEFAULT_PLAYBACK_SPEED, s.DEFAULT_PLAYBACK_OVERLAP_SPEED)
        first = schedule.first_for(load)
        return first is not None and first <= s.VIABILITY_MAX_FIRST_S * TOKENS_PER_SECOND

    async def plan(self, job: SpeechJob) -> NeuCodecUtterance:
        """The prompt for ``job`` (a VC prompt for a reference voice; with interleave history for an
        interleave id, built-in voices only), with ``max_tokens`` fitted to what the LM window leaves; a
        text one generation cannot speak is cut into parts, each planned the same way."""
        if self.codec is None:
            raise Unavailable("The codec is not loaded yet.")
        s = self.settings
        schedule = self.schedule(
            s.DEFAULT_PLAYBACK_SPEED if job.first_chunk_s is None else job.first_chunk_s,
            s.DEFAULT_PLAYBACK_OVERLAP_SPEED if job.overlap_s is None else job.overlap_s,
        )
        voice = job.voice
        interleaved = job.interleave_id is not None and self.conversations.enabled and isinstance(voice, str)
        if isinstance(voice, ReferenceVoice):
            reference = voice

            def prompt_of(text: str) -> str:
                return vc_prompt(reference.text, reference.codes, text)

            param = "reference_audio"
        else:
            speaker = voice

            def prompt_of(text: str) -> str:
                return tts_prompt(speaker, text)

            param = "input"
        s = self.settings
        max_tokens = job.sampling.max_tokens
        budget = Budget(
            max_units=min(max_tokens, s.INTERLEAVE_MIN_GEN_TOKENS) if interleaved else max_tokens,
            min_room=MIN_ROOM_TOKENS,
            units_per_s=TOKENS_PER_SECOND,
            chars_per_s=s.LONG_INPUT_CHARS_PER_S,
            wide_chars_per_s=s.LONG_INPUT_WIDE_CHARS_PER_S,
        )

        def counted(text: str) -> Prompt:
            prompt = prompt_of(text)
            return Prompt(prompt, self.conversations.count(prompt))

        def room(prompt: Prompt) -> int:
            return s.LM_MAX_MODEL_LEN - prompt.tokens

        texts = await asyncio.to_thread(cut_into_parts, job.text, counted, room, budget)
        parts = [
            PlannedPart(
                part.text,
                self._fitted(self._params(part.prompt.text, job, index), part.prompt.tokens, param),
            )
            for index, part in enumerate(texts)
        ]
        crossfade = width_samples(s.LONG_INPUT_CROSSFADE_MS)
        if not interleaved:
            return NeuCodecUtterance(self, parts, schedule, None, job.attributes, crossfade)
        assert job.interleave_id is not None and isinstance(voice, str)
        turn = await self.conversations.prepare(
            job.interleave_id, voice, parts[0].text, parts[0].params, job.retain_turns
        )
        return NeuCodecUtterance(self, parts, schedule, turn, job.attributes, crossfade)

    async def open_stream(self, job: StreamJob) -> NeuCodecStream:
        """A realtime turn, pipelined by segment (``stream.py``)."""
        if self.codec is None:
            raise Unavailable("The codec is not loaded yet.")
        s = self.settings
        schedule = self.schedule(
            s.DEFAULT_PLAYBACK_SPEED if job.first_chunk_s is None else job.first_chunk_s,
            s.DEFAULT_PLAYBACK_OVERLAP_SPEED if job.overlap_s is None else job.overlap_s,
        )
        return NeuCodecStream(self, job, schedule, width_samples(s.LONG_INPUT_CROSSFADE_MS))

    def segment_part(self, job: SpeechJob, text: str, index: int) -> PlannedPart:
        """Segment ``index`` of a realtime turn, planned as a long input's part ``index`` (blocking: the
        prompt is counted by the tokenizer)."""
        voice = job.voice
        if isinstance(voice, ReferenceVoice):
            prompt, param = vc_prompt(voice.text, voice.codes, text), "reference_audio"
        else:
            prompt, param = tts_prompt(voice, text), "input"
        params = self._fitted(self._params(prompt, job, index), self.conversations.count(prompt), param)
        return PlannedPart(text, params)

    def _fitted(self, params: GenerationParams, prompt_tokens: int, param: str) -> GenerationParams:
        """``params`` with ``max_tokens`` cut to the room the prompt (``prompt_tokens`` long) leaves in
        LM_MAX_MODEL_LEN; a 400 naming ``param`` when it leaves no room at all (vLLM would refuse it)."""
        window = self.settings.LM_MAX_MODEL_LEN
        room = window - prompt_tokens
        if room < MIN_ROOM_TOKENS:
            raise InvalidRequest(
                f"{param}: too long for the model: the prompt is about {prompt_tokens} tokens and the "
                f"model's context window is {window} (LM_MAX_MODEL_LEN); shorten the text or the reference.",
                param=param,
                code="context_length_exceeded",
            )
        return dataclasses.replace(params, max_tokens=min(params.max_tokens, room))

    def _params(self, prompt: str, job: SpeechJob, part: int = 0) -> GenerationParams:
        """The LM call: ``prompt`` with the job's sampling (the seed derived for ``part``), for the
        served model."""
        sampling = dataclasses.replace(job.sampling, seed=part_seed(job.sampling.seed, part))
        return GenerationParams(prompt=prompt, model=self.settings.MODEL_NAME, **dataclasses.asdict(sampling))
