"""MossFamily: MOSS-TTS-Realtime served through the seam: the batched frame engine and the MOSS codec.

Owns the LM stage (``lm.MossLM``: prompter, frame engine, window), the MOSS codec service (streamed
decodes batched across streams; the encoder for voice prompts), the content cache of encoded references
and its built-in voices, all built from ``Settings`` and started in ``start``. ``plan`` resolves the
voice (``default`` = no voice prompt, a shipped clip, or reference codes from ``/v1/audio/vc`` and
registered voices), the sampling (the request's speech fields over the seed's defaults), the history of
an interleave id, and fits it all to the backbone window; ``MossUtterance.stream`` runs the frames
through a codec stream of its own (``speak``) and stores the finished turn before the stream ends.

``max_tokens`` counts frames (80 ms each). It is cut to the room the prompt leaves in the backbone
window (``MossLM.max_positions`` rows, less the prefill rows), as the NeuCodec family cuts it to
LM_MAX_MODEL_LEN; a prompt that leaves less than ``MIN_ROOM_FRAMES``, or fewer frames than the text
still has to feed after the prefill (one text id per frame), is a 400. With history, the oldest
turns are dropped until the prompt leaves the new turn the room it would have without them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import logging
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import anyio
import numpy as np

from app.codec.reference_cache import ReferenceCache
from app.config import Settings
from app.core.errors import InvalidRequest, Unavailable
from app.core.family import Capabilities, ReferenceFormat, ReferenceVoice, Sampling, SpeechJob
from app.core.stats import UtteranceStats
from app.core.types import Attributes
from app.families.moss import history
from app.families.moss.lm import MossLM, load_lm
from app.families.moss.speak import ChunkSchedule, speak
from app.families.moss.voices import DEFAULT_VOICE, catalog, clip_paths, encode_clips
from app.hub import REPO_ID_RE
from app.interleave.ids import HEADER, header_echo
from app.interleave.service import Interleave
from app.interleave.turns import Turn as StoredTurn
from app.lm.moss.types import AUDIO_VOCAB, CODE_VALUES, CODEBOOKS, FrameJob, FrameSampling, Turn
from app.observability.metrics import Metrics
from app.observability.startup import startup_step
from app.observability.tracing import start_span, traced_stream

if TYPE_CHECKING:
    import torch

    from app.codec.moss.model import MossAudioCodec
    from app.codec.moss.service import MossCodecService, MossStream
    from app.codec.shared_codes import FileSharedCodes, RedisSharedCodes

log = logging.getLogger(__name__)

NAME = "moss"
SAMPLE_RATE = 24_000
MIN_ROOM_FRAMES = 13
"""Fewest frames (about 1 s) a prompt must leave in the backbone window to be worth generating."""
SEED_SAMPLING = FrameSampling()
"""The seed's recommended sampling: temperature 0.8, top_p 0.6, top_k 30, repetition penalty 1.1."""

LMLoader = Callable[[Settings, str], MossLM]
"""Settings and the device -> the LM stage (blocking; run in a worker thread)."""
CodecLoader = Callable[[Settings, "torch.device"], "MossAudioCodec"]
"""Settings and the device -> the MOSS codec (blocking; run in a worker thread)."""


def load_codec(settings: Settings, device: torch.device) -> MossAudioCodec:
    """MOSS_CODEC_MODEL on ``device``: its encoder only with MOSS_VOICE_PROMPTS, its transformers in
    MOSS_CODEC_DTYPE."""
    import torch

    from app.codec.moss.loading import load_codec as load

    dtype = torch.bfloat16 if settings.MOSS_CODEC_DTYPE == "bfloat16" else torch.float32
    return load(settings.MOSS_CODEC_MODEL, device, with_encoder=settings.MOSS_VOICE_PROMPTS, dtype=dtype)


def model_ids(settings: Settings) -> tuple[str, ...]:
    """MOSS_MODEL_NAME, and MOSS_TTS_MODEL too when it is a Hub id (a local path is no model name)."""
    ids = [settings.MOSS_MODEL_NAME]
    if REPO_ID_RE.match(settings.MOSS_TTS_MODEL) and settings.MOSS_TTS_MODEL not in ids:
        ids.append(settings.MOSS_TTS_MODEL)
    return tuple(ids)


def shared_codes(settings: Settings) -> RedisSharedCodes | FileSharedCodes | None:
    """Encoded references shared with the other processes, beside the NeuCodec family's (its own keys)."""
    if settings.REFERENCE_CACHE_SIZE == 0:
        return None
    from app.codec.shared_codes import shared_codes_for  # imports redis: only when it is used

    return shared_codes_for(settings, NAME)


class _Decoder:
    """The utterance's codec stream, opened with its first chunk: a request waiting for a row of the
    engine holds no decoder state (~180 MB in float32)."""

    def __init__(self, codec: MossCodecService) -> None:
        self.codec = codec
        self.stream: MossStream | None = None

    async def __call__(self, frames: np.ndarray) -> np.ndarray:
        if self.stream is None:
            self.stream = self.codec.open_stream()  # 503 when MOSS_CODEC_MAX_STREAMS are open
        return await self.stream.decode(frames)

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()


class MossUtterance:
    """One planned MOSS request: its frame job, and the turn to store when an interleave id is set."""

    def __init__(
        self,
        family: MossFamily,
        job: FrameJob,
        request: SpeechJob,
        voice: str | None,
        history_turns: Sequence[Turn],
    ) -> None:
        self.family = family
        self.job = job
        self.request = request
        self.voice = voice  # the built-in voice (history is kept for built-in voices only)
        self.history_turns = history_turns

    @property
    def turn_kept(self) -> bool:
        """True when the finished turn goes to the interleave store."""
        return self.request.interleave_id is not None and self.voice is not None

    def attributes(self) -> Attributes:
        sampling = self.job.sampling
        return {
            **self.request.attributes,
            "tts.model": self.request.model,
            "max_tokens": self.job.max_frames,
            "temperature": sampling.temperature,
            "prompt_rows": int(self.job.prefill.shape[0]),
            "history_turns": len(self.history_turns),
        }

    def headers(self) -> Mapping[str, str]:
        if not self.turn_kept:
            return {}
        assert self.request.interleave_id is not None
        frames = sum(len(turn.frames) for turn in self.history_turns)
        return {
            HEADER: header_echo(self.request.interleave_id),
            "X-Interleave-Turns": str(len(self.history_turns)),
            "X-Interleave-Tokens": str(frames),
        }

    async def stream(self, stats: UtteranceStats) -> AsyncGenerator[np.ndarray, None]:
        """PCM chunks as the engine makes frames; closing it closes the engine's row and the codec
        stream. A turn that ended normally ("stop") is stored before the stream ends."""
        family = self.family
        lm, codec = family.parts()
        stats.prompt_tokens = int(self.job.prefill.shape[0])
        started = time.perf_counter()
        decoder = _Decoder(codec)
        frames: AsyncGenerator[np.ndarray, None] | None = None
        chunks: AsyncGenerator[np.ndarray, None] | None = None
        made: list[np.ndarray] = []
        try:
            frames = lm.engine.stream(self.job)
            chunks = traced_stream(
                start_span("tts.stream", self.attributes()),
                speak(frames, decoder, family.schedule, self.job.max_frames, stats, made),
                stats.span_attributes,
            )
            async for chunk in chunks:
                yield chunk
        except Exception:
            stats.finish_reason = "error"
            raise
        finally:  # closed by its consumer (GeneratorExit) or cancelled: "cancelled" below
            with anyio.CancelScope(shield=True):
                if chunks is not None:
                    await chunks.aclose()
                if frames is not None:
                    await frames.aclose()
            decoder.close()
            if stats.finish_reason is None:
                stats.finish_reason = "cancelled"
            stats.generation_s = time.perf_counter() - started
        if self.turn_kept and stats.finish_reason == "stop" and made:
            assert self.voice is not None and self.request.interleave_id is not None
            record = history.record(self.voice, self.request.text, np.concatenate(made))
            await family.interleave.commit_turn(self.request.interleave_id, record, self.request.retain_turns)


class MossFamily:
    """The MOSS-TTS-Realtime family (a Qwen3 backbone + local transformer over 16 codebooks)."""

    name = NAME
    capabilities = Capabilities(reference_voice=True, multi_turn=True)
    reference = ReferenceFormat(rate=SAMPLE_RATE, codebooks=CODEBOOKS, needs_transcript=False)

    def __init__(
        self,
        settings: Settings,
        interleave: Interleave,
        metrics: Metrics,
        *,
        lm_loader: LMLoader = load_lm,
        codec_loader: CodecLoader = load_codec,
    ) -> None:
        self.settings = settings
        self.clips = clip_paths(settings.MOSS_VOICES_DIR)
        self.voices = catalog(settings, self.clips)
        self.defaults = Sampling(
            max_tokens=settings.MOSS_DEFAULT_MAX_TOKENS,
            temperature=SEED_SAMPLING.temperature,
            repetition_penalty=SEED_SAMPLING.repetition_penalty,
            top_p=SEED_SAMPLING.top_p,
            top_k=SEED_SAMPLING.top_k,
        )
        self.schedule = ChunkSchedule(settings.MOSS_FIRST_CHUNK_FRAMES, settings.MOSS_MAX_CHUNK_FRAMES)
        self.shared_codes = shared_codes(settings)
        self.references = ReferenceCache(settings.REFERENCE_CACHE_SIZE, shared=self.shared_codes)
        self.interleave = interleave
        self.metrics = metrics
        self.lm_loader = lm_loader
        self.codec_loader = codec_loader
        self.lm: MossLM | None = None
        self.codec: MossCodecService | None = None
        self.voice_codes: dict[str, np.ndarray] = {}  # built-in voice -> its clip's codes (F, 16)
        self._details: dict[str, object] = {}

    def model_ids(self) -> Sequence[str]:
        return model_ids(self.settings)

    async def start(self) -> None:
        """Load the codec (with its encoder when MOSS_VOICE_PROMPTS) and the LM off the event loop, start
        the codec's batchers and the frame engine, then encode the built-in voice clips."""
        from app.codec.moss.service import MossCodecOptions, MossCodecService
        from app.core.device import resolve_device
        from app.observability import tracing

        s = self.settings
        setting = "MOSS_TTS_DEVICE" if s.MOSS_TTS_DEVICE else "DEVICE"
        async with startup_step(setting, s.MOSS_TTS_DEVICE or s.DEVICE, "MOSS device"):
            device = resolve_device(s.MOSS_TTS_DEVICE or s.DEVICE)
        log.info("loading MOSS codec %s on %s (%s)", s.MOSS_CODEC_MODEL, device, s.MOSS_CODEC_DTYPE)
        async with startup_step("MOSS_CODEC_MODEL", s.MOSS_CODEC_MODEL, "MOSS codec"):
            model = await asyncio.to_thread(self.codec_loader, s, device)
        options = MossCodecOptions(
            max_streams=s.MOSS_CODEC_MAX_STREAMS,
            window_s=s.BATCH_WINDOW_MS / 1000,
            max_batch=s.MAX_BATCH_SIZE,
            timeout_s=s.BATCH_TIMEOUT,
            max_encode_batch=s.MAX_ENCODE_BATCH,
            num_quantizers=CODEBOOKS,
            reference_cache_size=0,  # the family's cache (shared with other processes) is used instead
        )
        self.codec = MossCodecService(model, device, options=options, observer=self.metrics, spans=tracing)
        self.codec.start()
        log.info("loading MOSS LM %s on %s", s.MOSS_TTS_MODEL, device)
        async with startup_step("MOSS_TTS_MODEL", s.MOSS_TTS_MODEL, "MOSS LM"):
            self.lm = await asyncio.to_thread(self.lm_loader, s, str(device))
        self.lm.engine.start()
        await self.interleave.start()
        if self.shared_codes is not None:
            await self.shared_codes.start()
        if self.clips:
            async with startup_step("MOSS_VOICES_DIR", s.MOSS_VOICES_DIR, "MOSS voices"):
                if not s.MOSS_VOICE_PROMPTS:
                    raise ValueError("the voice clips need the codec encoder: set MOSS_VOICE_PROMPTS=true")
                self.voice_codes = await encode_clips(s, self.clips, self.encode_reference)
        self._details = {"device": str(device), "codec_dtype": s.MOSS_CODEC_DTYPE}
        # the loudness stage's filter: imported now, not on the first request (about 2 s cold)
        await asyncio.to_thread(importlib.import_module, "scipy.signal")

    async def close(self) -> None:
        """Stop the frame engine, the interleave store and the codec; safe after a failed start."""
        if self.lm is not None:
            await self.lm.engine.close()
            self.lm = None
        await self.interleave.close()
        if self.shared_codes is not None:
            await self.shared_codes.close()
        if self.codec is not None:
            await self.codec.close()
            self.codec = None

    def details(self) -> dict[str, object]:
        """Device, codec dtype and the frame engine's choices (dtype, attention, batch)."""
        if self.lm is None:
            return dict(self._details)
        return {**self._details, "lm": self.lm.engine.details()}

    async def ready(self) -> dict[str, bool]:
        return {
            "codec": self.codec is not None,
            "lm": self.lm is not None and self.lm.engine.ready(),
        }

    def parts(self) -> tuple[MossLM, MossCodecService]:
        """The started LM stage and codec; 503 before the start or after the close."""
        if self.lm is None or self.codec is None:
            raise Unavailable("The MOSS model is not loaded yet.")
        return self.lm, self.codec

    def check_can_encode(self) -> None:
        if not self.settings.MOSS_VOICE_PROMPTS:
            raise InvalidRequest(
                "Voice prompts are disabled for the MOSS model on this server (MOSS_VOICE_PROMPTS=false).",
                code="vc_disabled",
            )
        self.parts()

    async def encode_reference(self, samples: np.ndarray, digest: str) -> list[int]:
        """Codes of a 24 kHz reference, flat frame by frame (16 per frame): cached, shared or encoded."""
        self.check_can_encode()
        return await self.references.get_or_encode(digest, samples, self._encode)

    async def _encode(self, samples: np.ndarray) -> list[int]:
        codec = self.parts()[1]
        try:
            codes = await codec.encode(samples)
        except ValueError as exc:  # audio the encoder cannot take (shorter than a frame)
            raise InvalidRequest(f"reference audio: {exc}", param="reference_audio") from exc
        return [int(code) for code in codes.reshape(-1)]

    async def plan(self, job: SpeechJob) -> MossUtterance:
        """The frame job for ``job``: voice, sampling, history (built-in voices with an interleave id),
        fitted to the backbone window (see the module docstring)."""
        lm, _ = self.parts()
        reference, voice = self._voice(job.voice)
        sampling = self._sampling(job.sampling)
        stored: list[StoredTurn] = []
        if job.interleave_id is not None and voice is not None and self.interleave.enabled:
            stored = await self.interleave.history(job.interleave_id)
        param = "reference_audio" if isinstance(job.voice, ReferenceVoice) else "input"
        frame_job, used = await asyncio.to_thread(
            self._fit, lm, job, reference, voice, stored, sampling, param
        )
        return MossUtterance(self, frame_job, job, voice, used)

    def _voice(self, voice: str | ReferenceVoice) -> tuple[np.ndarray | None, str | None]:
        """The voice prompt's codes ``(F, 16)`` (None for ``default``) and the built-in voice's name (None
        for reference audio). 400 for reference codes that are not MOSS frames."""
        if isinstance(voice, ReferenceVoice):
            frames = np.asarray(voice.codes, dtype=np.int64)
            if voice.codebooks != CODEBOOKS or frames.size == 0 or frames.size % CODEBOOKS:
                raise InvalidRequest("The voice's codes are not MOSS codec frames.", param="voice")
            if int(frames.min()) < 0 or int(frames.max()) >= CODE_VALUES:
                raise InvalidRequest("The voice's codes are out of the MOSS codec's range.", param="voice")
            return frames.reshape(-1, CODEBOOKS), None
        if voice == DEFAULT_VOICE:
            return None, voice
        if voice not in self.voice_codes:
            raise Unavailable(f"The MOSS voice {voice!r} is not encoded yet.")
        return self.voice_codes[voice], voice

    def _sampling(self, sampling: Sampling) -> FrameSampling:
        """The request's sampling for the frame engine (top_k beyond the 1027 classes keeps them all)."""
        return FrameSampling(
            temperature=sampling.temperature,
            top_p=sampling.top_p if sampling.top_p is not None else SEED_SAMPLING.top_p,
            top_k=min(sampling.top_k if sampling.top_k is not None else SEED_SAMPLING.top_k, AUDIO_VOCAB),
            repetition_penalty=sampling.repetition_penalty,
            repetition_window=self.settings.MOSS_REPETITION_WINDOW,
            seed=sampling.seed,
        )

    def _fit(
        self,
        lm: MossLM,
        job: SpeechJob,
        reference: np.ndarray | None,
        voice: str | None,
        stored: list[StoredTurn],
        sampling: FrameSampling,
        param: str,
    ) -> tuple[FrameJob, list[Turn]]:
        """The job with the most recent history that fits, and that history (worker thread: it
        tokenizes). 400 naming ``param`` when even the plain prompt leaves no room to speak."""
        window = lm.max_positions
        wanted = job.sampling.max_tokens

        def build(turns: Sequence[Turn]) -> FrameJob:
            return lm.prompter.job(
                job.text, reference=reference, history=turns, sampling=sampling, max_frames=wanted
            )

        cold = build(())
        rows = int(cold.prefill.shape[0])
        room = window - rows
        if room < max(MIN_ROOM_FRAMES, len(cold.text_tail) + 1):  # the text is fed one id per frame
            raise InvalidRequest(
                f"{param}: too long for the model: the prompt is {rows} rows, the text needs "
                f"{len(cold.text_tail)} more, and the model's window is {window}; shorten the text or "
                "the reference.",
                param=param,
                code="context_length_exceeded",
            )
        frames = min(wanted, room)
        turns = history.turns(stored, voice, job.retain_turns, lm.prompter.text_ids) if voice else []
        for start in range(len(turns)):
            warm = build(turns[start:])
            if int(warm.prefill.shape[0]) + frames <= window:
                return dataclasses.replace(warm, max_frames=frames), turns[start:]
        return dataclasses.replace(cold, max_frames=frames), []
