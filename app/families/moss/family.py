"""MossFamily: MOSS-TTS-Realtime served through the seam: the batched frame engine and the MOSS codec.

Owns the LM stage (``lm.MossLM``: prompter, frame engine, window), the MOSS codec service (streamed
decodes batched across streams; the encoder for voice prompts), the content cache of encoded references
and its built-in voices, all built from ``MossSettings`` and started in ``start``. ``plan`` resolves the
voice (``default`` = no voice prompt, a shipped clip, or reference codes from ``/v1/audio/vc`` and
registered voices), the sampling (the request's speech fields over the seed's defaults), the history of
an interleave id, and fits it all to the backbone window; ``MossUtterance.stream`` (``utterance.py``)
runs the frames through a codec stream of its own (``speak``) and stores the finished turn before the
stream ends.

A text that one generation cannot speak is cut into parts (``app.families.shared.long_input``): a part's
estimated speech, at 12.5 frames per second, must fit ``max_tokens`` and the room its plain prompt
leaves in the window. A text that fits is one part, as before. Each part is planned like a request of
its own (voice, sampling, the seed derived with ``part_seed``); the interleave history goes to the
first part only.

``max_tokens`` counts frames (80 ms each). It is cut to the room the prompt leaves in the backbone
window (``MossLM.max_positions`` rows, less the prefill rows), as the NeuCodec family cuts it to
LM_MAX_MODEL_LEN; a prompt that leaves less than ``MIN_ROOM_FRAMES``, or fewer frames than the text
still has to feed after the prefill (one text id per frame), is a 400. With history, the oldest
turns are dropped until the prompt leaves the new turn the room it would have without them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from app.audio.splice import width_samples
from app.codec.reference_cache import ReferenceCache
from app.core.errors import InvalidAudio, InvalidRequest, Unavailable
from app.core.family import (
    Capabilities,
    ContextWindow,
    ReferenceFormat,
    ReferenceVoice,
    Sampling,
    SpeechJob,
    StreamJob,
)
from app.families.moss import history
from app.families.moss.lm.feed import TextFeed
from app.families.moss.lm.stage import MossLM, load_lm
from app.families.moss.lm.types import (
    AUDIO_VOCAB,
    CODE_VALUES,
    CODEBOOKS,
    FrameJob,
    FrameSampling,
    Precision,
    Turn,
)
from app.families.moss.settings import MossSettings
from app.families.moss.speak import FRAMES_PER_SECOND, ChunkSchedule
from app.families.moss.stream import MossTextStream
from app.families.moss.utterance import MossUtterance, PlannedPart
from app.families.moss.voices import DEFAULT_VOICE, catalog, clip_paths, encode_clips
from app.families.shared.lifecycle import Running, warm_post_stages
from app.families.shared.long_input import Budget, cut_into_parts, part_seed
from app.hub import REPO_ID_RE
from app.interleave.service import Interleave
from app.interleave.turns import Turn as StoredTurn
from app.observability.metrics import Metrics
from app.observability.startup import startup_step

if TYPE_CHECKING:
    import torch

    from app.codec.shared_codes import FileSharedCodes, RedisSharedCodes
    from app.families.moss.codec.model import MossAudioCodec
    from app.families.moss.codec.service import MossCodecService

log = logging.getLogger(__name__)

NAME = "moss"
SAMPLE_RATE = 24_000
MAX_FIRST_CHUNK_FRAMES = 64
"""Largest first decode a request's ``playback_speed`` may ask for (5.12 s; MOSS_MAX_CHUNK_FRAMES' bound)."""
MIN_ROOM_FRAMES = 13
"""Fewest frames (about 1 s) a prompt must leave in the backbone window to be worth generating."""
SEED_SAMPLING = FrameSampling()
"""The seed's recommended sampling: temperature 0.8, top_p 0.6, top_k 30, repetition penalty 1.1."""

LMLoader = Callable[[MossSettings, str], MossLM]
"""MossSettings and the device -> the LM stage (blocking; run in a worker thread)."""
CodecLoader = Callable[[MossSettings, "torch.device"], "MossAudioCodec"]
"""MossSettings and the device -> the MOSS codec (blocking; run in a worker thread)."""


def load_codec(settings: MossSettings, device: torch.device) -> MossAudioCodec:
    """MOSS_CODEC_MODEL on ``device``: its encoder only with MOSS_REFERENCE_VOICES, its transformers in
    the dtypes ``codec_precision`` chooses."""
    import torch

    from app.families.moss.codec.loading import load_codec as load

    decoder, encoder = codec_precision(settings, device.type)
    return load(
        settings.MOSS_CODEC_MODEL,
        device,
        with_encoder=settings.MOSS_REFERENCE_VOICES,
        dtype=getattr(torch, decoder.dtype),
        encoder_dtype=getattr(torch, encoder.dtype),
    )


def codec_precision(
    settings: MossSettings,
    device_kind: str,
    *,
    flags: Iterable[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Precision, Precision]:
    """The decoder's and the encoder's dtype for MOSS_CODEC_DTYPE, and why. ``auto``: the decoder by the
    codec's hardware rule (bf16 on npu and on a CPU with bf16 matrix instructions; ``flags`` and ``env``
    default to this CPU's), float32 elsewhere; the encoder in float32 (a bf16 encoder changes a voice
    prompt's codes). An explicit dtype sets both; bf16 asked for on a CPU without bf16 matrix
    instructions is flagged ``slow``."""
    from app.codec.precision import cpu_bf16_matmul

    setting = settings.MOSS_CODEC_DTYPE
    fast, why = (False, "") if device_kind != "cpu" else cpu_bf16_matmul(_flags(flags), env)
    if setting != "auto":
        reason = f"MOSS_CODEC_DTYPE={setting} (explicit)"
        if setting != "float32" and device_kind == "cpu" and not fast:
            reason += f"; WARNING: this CPU has {why}, expect it to be many times slower than float32"
            return Precision(setting, reason, slow=True), Precision(setting, reason, slow=True)
        return Precision(setting, reason), Precision(setting, reason)
    encoder = Precision("float32", "auto: float32, exact voice-prompt codes")
    if device_kind == "npu":
        return Precision("bfloat16", "auto: NPU, bf16 is its native matrix format"), encoder
    if device_kind != "cpu":
        return Precision("float32", f"auto: {device_kind}, float32"), encoder
    if fast:
        reason = f"auto: CPU with bf16 matrix instructions ({why}); bf16 audio 34 dB SNR against float32"
        return Precision("bfloat16", reason), encoder
    return Precision("float32", f"auto: CPU without fast bf16 ({why}), float32"), encoder


def _flags(flags: Iterable[str] | None) -> Iterable[str]:
    from app.codec.precision import cpu_flags

    return cpu_flags() if flags is None else flags


def model_ids(settings: MossSettings) -> tuple[str, ...]:
    """MOSS_MODEL_NAME, and MOSS_TTS_MODEL too when it is a Hub id (a local path is no model name)."""
    ids = [settings.MOSS_MODEL_NAME]
    if REPO_ID_RE.fullmatch(settings.MOSS_TTS_MODEL) and settings.MOSS_TTS_MODEL not in ids:
        ids.append(settings.MOSS_TTS_MODEL)
    return tuple(ids)


def shared_codes(settings: MossSettings) -> RedisSharedCodes | FileSharedCodes | None:
    """Encoded references shared with the other processes, beside the NeuCodec family's (its own keys)."""
    if settings.REFERENCE_CACHE_SIZE == 0:
        return None
    from app.codec.shared_codes import shared_codes_for  # imports redis: only when it is used

    return shared_codes_for(settings, NAME)


class MossFamily:
    """The MOSS-TTS-Realtime family (a Qwen3 backbone + local transformer over 16 codebooks)."""

    name = NAME
    capabilities = Capabilities(reference_voice=True, multi_turn=True)
    reference = ReferenceFormat(rate=SAMPLE_RATE, codebooks=CODEBOOKS, needs_transcript=False)

    def __init__(
        self,
        settings: MossSettings,
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
        self.schedule = ChunkSchedule(
            settings.MOSS_FIRST_CHUNK_FRAMES, settings.MOSS_MAX_CHUNK_FRAMES, settings.MOSS_DEADLINE_CUTS
        )
        self.shared_codes = shared_codes(settings)
        self.references = ReferenceCache(
            settings.REFERENCE_CACHE_SIZE, shared=self.shared_codes, code_values=CODE_VALUES
        )
        self.interleave = interleave
        self.metrics = metrics
        self.lm_loader = lm_loader
        self.codec_loader = codec_loader
        self.lm: MossLM | None = None
        self.codec: MossCodecService | None = None
        self.voice_codes: dict[str, np.ndarray] = {}  # built-in voice -> its clip's codes (F, 16)
        self._details: dict[str, object] = {}
        self.running = Running()

    def model_ids(self) -> Sequence[str]:
        return model_ids(self.settings)

    async def start(self) -> None:
        """Load the codec (with its encoder when MOSS_REFERENCE_VOICES) and the LM off the event loop, start
        the codec's batchers and the frame engine, then encode the built-in voice clips."""
        from app.codec.prepack import prepack_for_cpu
        from app.core.device import resolve_device
        from app.families.moss.codec.service import MossCodecOptions, MossCodecService
        from app.observability import tracing

        s = self.settings
        setting = "MOSS_DEVICE" if s.MOSS_DEVICE else "DEVICE"
        async with startup_step(setting, s.MOSS_DEVICE or s.DEVICE, "MOSS device"):
            device = resolve_device(s.MOSS_DEVICE or s.DEVICE)
        decoder, encoder = codec_precision(s, device.type)
        log_precision = log.warning if decoder.slow else log.info
        log_precision(
            "loading MOSS codec %s on %s: decoder %s (%s), encoder %s",
            s.MOSS_CODEC_MODEL,
            device,
            decoder.dtype,
            decoder.reason,
            encoder.dtype if s.MOSS_REFERENCE_VOICES else "not loaded",
        )
        async with startup_step("MOSS_CODEC_MODEL", s.MOSS_CODEC_MODEL, "MOSS codec"):
            model = await asyncio.to_thread(self.codec_loader, s, device)
        options = MossCodecOptions(
            max_streams=s.MOSS_CODEC_MAX_STREAMS,
            window_s=s.BATCH_WINDOW_MS / 1000,
            max_batch=s.MAX_BATCH_SIZE,
            timeout_s=s.BATCH_TIMEOUT,
            max_encode_batch=s.MAX_ENCODE_BATCH,
            num_quantizers=CODEBOOKS,
        )
        codec_prepacked = False
        if s.MOSS_PREPACK and device.type == "cpu":  # the decoder only: the encoder's codes stay exact
            report = await asyncio.to_thread(prepack_for_cpu, model.decoder, "MOSS codec decoder")
            codec_prepacked = report.packed > 0
        codec = MossCodecService(model, device, options=options, observer=self.metrics, spans=tracing)
        codec.start()
        self.codec = codec
        self.running.add("MOSS codec", self._close_codec)
        log.info("loading MOSS LM %s on %s", s.MOSS_TTS_MODEL, device)
        async with startup_step("MOSS_TTS_MODEL", s.MOSS_TTS_MODEL, "MOSS LM"):
            lm = await asyncio.to_thread(self.lm_loader, s, str(device))
        lm.engine.start()
        self.lm = lm
        self.running.add("MOSS frame engine", self._close_lm)
        await self.interleave.start()
        self.running.add("interleave store", self.interleave.close)
        if self.shared_codes is not None:
            await self.shared_codes.start()
            self.running.add("shared references", self.shared_codes.close)
        if self.clips:
            async with startup_step("MOSS_VOICES_DIR", s.MOSS_VOICES_DIR, "MOSS voices"):
                if not s.MOSS_REFERENCE_VOICES:
                    raise ValueError("the voice clips need the codec encoder: set MOSS_REFERENCE_VOICES=true")
                self.voice_codes = await encode_clips(s, self.clips, self.encode_reference)
        parts = {"decoder": decoder.detail() | {"prepacked": codec_prepacked}} | (
            {"encoder": encoder.detail()} if s.MOSS_REFERENCE_VOICES else {}
        )
        self._details = {"device": str(device), "codec": parts}
        await warm_post_stages()

    async def close(self) -> None:
        """Stop what started, the last first (shared references, interleave store, frame engine, codec);
        safe after a failed start."""
        await self.running.close()

    async def _close_lm(self) -> None:
        lm, self.lm = self.lm, None
        if lm is not None:
            await lm.engine.close()

    async def _close_codec(self) -> None:
        codec, self.codec = self.codec, None
        if codec is not None:
            await codec.close()

    def context_window(self) -> ContextWindow:
        """The backbone window (or the cache budget when smaller), in frame positions, once the LM is
        loaded (0 before), and the room a prompt always leaves."""
        return ContextWindow(self.lm.max_positions if self.lm is not None else 0, MIN_ROOM_FRAMES)

    def details(self) -> dict[str, object]:
        """Device, the codec's dtype and why, the frame engine's choices (dtype, attention, batch), the
        LM's dtype and why (``precision``) and whether codec decoder and LM are prepacked (MOSS_PREPACK)."""
        if self.lm is None:
            return dict(self._details)
        lm = self.lm.engine.details()
        if self.lm.precision is not None:
            lm["precision"] = self.lm.precision.detail()
        lm["prepacked"] = self.lm.prepacked
        return {**self._details, "lm": lm}

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
        if not self.settings.MOSS_REFERENCE_VOICES:
            raise InvalidRequest(
                "Voice prompts are disabled for the MOSS model on this server (MOSS_REFERENCE_VOICES=false).",
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
            raise InvalidAudio(f"the MOSS codec cannot encode the clip: {exc}") from exc
        return [int(code) for code in codes.reshape(-1)]

    async def plan(self, job: SpeechJob) -> MossUtterance:
        """The frame jobs for ``job``: voice, sampling, history (built-in voices with an interleave id),
        the text cut into parts when one generation cannot speak it, fitted to the backbone window (see
        the module docstring)."""
        lm, _ = self.parts()
        reference, voice = self._voice(job.voice)
        sampling = self._sampling(job.sampling)
        stored: list[StoredTurn] = []
        if job.interleave_id is not None and voice is not None and self.interleave.enabled:
            stored = await self.interleave.history(job.interleave_id)
        param = "reference_audio" if isinstance(job.voice, ReferenceVoice) else "input"
        parts, used = await asyncio.to_thread(self._fit, lm, job, reference, voice, stored, sampling, param)
        crossfade = width_samples(self.settings.LONG_INPUT_CROSSFADE_MS)
        return MossUtterance(self, parts, job, voice, reference, used, self._schedule(job), crossfade)

    def _schedule(self, job: SpeechJob) -> ChunkSchedule:
        """The decode sizes: the request's ``playback_speed`` (the first audio, in seconds) as 80 ms frames
        when it set one (at most MAX_FIRST_CHUNK_FRAMES), else MOSS_FIRST_CHUNK_FRAMES; then doubling up to
        MOSS_MAX_CHUNK_FRAMES (or the first, when larger)."""
        asked = job.first_chunk_s
        if asked is None:
            return self.schedule
        first = min(MAX_FIRST_CHUNK_FRAMES, max(1, math.ceil(asked * FRAMES_PER_SECOND - 1e-6)))
        return ChunkSchedule(first, max(first, self.schedule.largest), self.schedule.cuts)

    async def open_stream(self, job: StreamJob) -> MossTextStream:
        """A realtime turn fed into one running generation as its text arrives (``stream.py``): the
        voice, sampling and the session's history resolved now, the prompt built when the first ids
        are there, fitted to the window (the oldest history turns dropped until ``MIN_ROOM_FRAMES``
        are left)."""
        lm, _ = self.parts()
        reference, voice = self._voice(job.voice)
        sampling = self._sampling(job.sampling)
        stored: list[StoredTurn] = []
        if job.conversation is not None and voice is not None and self.interleave.enabled:
            stored = await self.interleave.history(job.conversation)
        turns: list[Turn] = []
        if voice is not None and stored:
            turns = await asyncio.to_thread(
                history.turns, stored, voice, job.retain_turns, lm.prompter.text_ids
            )
        window, wanted = lm.max_positions, job.sampling.max_tokens

        def build(ids: list[int], feed: TextFeed) -> FrameJob:
            for start in range(len(turns) + 1):
                built = lm.prompter.ids_job(
                    ids,
                    reference=reference,
                    history=turns[start:],
                    sampling=sampling,
                    max_frames=wanted,
                    feed=feed,
                )
                room = window - int(built.prefill.shape[0])
                if room >= MIN_ROOM_FRAMES:
                    return dataclasses.replace(built, max_frames=min(wanted, room))
            raise InvalidRequest(
                f"the voice prompt leaves no room to speak in the model's window of {window}",
                param="voice",
                code="context_length_exceeded",
            )

        return MossTextStream(self, lm, job, build, voice, reference)

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
    ) -> tuple[list[PlannedPart], list[Turn]]:
        """The parts, the first with the most recent history that fits, and that history (worker thread:
        it tokenizes). 400 naming ``param`` when even a part's plain prompt leaves no room to speak."""
        window = lm.max_positions
        wanted = job.sampling.max_tokens

        def build(text: str, turns: Sequence[Turn] = ()) -> FrameJob:
            return lm.prompter.job(
                text, reference=reference, history=turns, sampling=sampling, max_frames=wanted
            )

        budget = Budget(
            max_units=wanted,
            min_room=MIN_ROOM_FRAMES,
            units_per_s=FRAMES_PER_SECOND,
            chars_per_s=self.settings.LONG_INPUT_CHARS_PER_S,
            wide_chars_per_s=self.settings.LONG_INPUT_WIDE_CHARS_PER_S,
        )
        cuts = cut_into_parts(job.text, build, lambda cold: _room(cold, window), budget)
        parts = [
            PlannedPart(cut.text, self._fitted(cut.prompt, window, index, param))
            for index, cut in enumerate(cuts)
        ]
        first = parts[0]
        turns = history.turns(stored, voice, job.retain_turns, lm.prompter.text_ids) if voice else []
        for start in range(len(turns)):
            warm = build(first.text, turns[start:])
            if int(warm.prefill.shape[0]) + first.job.max_frames <= window:
                warm = dataclasses.replace(warm, max_frames=first.job.max_frames)
                return [PlannedPart(first.text, warm), *parts[1:]], turns[start:]
        return parts, []

    @staticmethod
    def _fitted(cold: FrameJob, window: int, index: int, param: str) -> FrameJob:
        """Part ``index``'s job: ``max_frames`` cut to the room its prompt leaves in ``window``, the seed
        derived for the part. 400 naming ``param`` when the prompt leaves no room to speak."""
        rows = int(cold.prefill.shape[0])
        if _room(cold, window) < MIN_ROOM_FRAMES:
            raise InvalidRequest(
                f"{param}: too long for the model: the prompt is {rows} rows, the text needs "
                f"{len(cold.text_tail)} more, and the model's window is {window}; shorten the text or "
                "the reference.",
                param=param,
                code="context_length_exceeded",
            )
        sampling = dataclasses.replace(cold.sampling, seed=part_seed(cold.sampling.seed, index))
        return dataclasses.replace(cold, sampling=sampling, max_frames=min(cold.max_frames, window - rows))


def _room(cold: FrameJob, window: int) -> int:
    """The frames ``cold``'s prompt leaves in ``window``; 0 when they cannot feed the rest of its text
    (one text id per frame)."""
    room = window - int(cold.prefill.shape[0])
    return room if room > len(cold.text_tail) else 0
