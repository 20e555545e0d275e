"""CodecWorker: the codec service of one process, a decode batcher and an encode batcher on one device.

``await decode(codes)`` and ``await encode(audio_16k)`` from any request. Each kind has its own queue
and thread (``app.codec.batcher``), so a long reference encode (a 30 s upload takes minutes on a
CPU) never holds up the decodes of streams that are playing. Decodes run earliest play-out deadline
first, batched across requests: on an accelerator windows of one length (the stitcher cuts windows to
a few bucket lengths so that lengths coincide), up to ``max_batch``; on a CPU windows of any lengths,
packed into one call, while a batch holds at most ``cpu_batch_codes`` codes (``decode_budget``) and, at
the measured decode cost (``cost``), ends by its most urgent window's deadline with ``cover`` to spare,
unless the window that would join is due by then too (``app.codec.deadlines``); run through a
``DecodeRunner``
(pinned buffers, copy/compute streams, CUDA graphs on cuda).
After every decode batch ``decoded(audio_s, compute_s)`` reports the work done (the admission's measured
codec rate). Encodes waiting together run as one batch; the encoder groups them by padded length, so each item
gets the codes it gets alone. Codes are validated on submit: a bad item fails alone, never its batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from app.codec.batcher import Batcher, BatchObserver, SpanRecorder
from app.codec.graphs import GraphPool
from app.codec.runner import DecodeRunner, Forward, PreparedBatch
from app.core import defaults
from app.core.constants import SAMPLE_RATE
from app.core.device import DeviceOps
from app.core.errors import Unavailable
from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.codec.encoder import MIN_SAMPLES, NeuCodecEncoder, frames_for

log = logging.getLogger(__name__)


class EncoderUnavailable(Unavailable):
    """503: this worker has no encoder (voice conversion is off)."""


WARMUP_RUNS = 2
"""Timed startup decodes of each warm-up length; the fastest is what the decode cost gets (startup runs
beside other loading, which would make a lone decode look slower than the codec is)."""


@dataclass(frozen=True)
class CodecOptions:
    """How the codec batches and runs; the Engine fills it from Settings (defaults: plain, eager)."""

    window_s: float = defaults.BATCH_WINDOW_MS / 1000  # BATCH_WINDOW_MS
    max_batch: int = defaults.MAX_BATCH_SIZE  # MAX_BATCH_SIZE
    timeout_s: float = defaults.BATCH_TIMEOUT_S  # BATCH_TIMEOUT
    max_encode_batch: int = defaults.MAX_ENCODE_BATCH  # MAX_ENCODE_BATCH
    cuda_graphs: bool = False  # CUDA_GRAPHS (cuda only)
    graph_batch_sizes: tuple[int, ...] = defaults.CUDA_GRAPH_BUCKETS  # CUDA_GRAPH_BUCKETS
    graph_lengths: tuple[int, ...] = ()  # captured at startup with every batch size (CODEC_BUCKETS)
    max_graphs: int = defaults.CUDA_GRAPH_MAX  # CUDA_GRAPH_MAX: startup and lazy captures together
    compile: bool = False  # TORCH_COMPILE
    batching: str = "auto"  # CODEC_BATCHING: auto (short windows only on a CPU) | on | off
    deadlines: bool = True  # CODEC_SCHEDULING: deadline (True) | fifo (False)
    cpu_batch_codes: int = defaults.CODEC_CPU_BATCH_CODES  # CODEC_CPU_BATCH_CODES
    cover: float = defaults.STREAM_FIRST_COVER  # STREAM_FIRST_COVER: a packed batch's time to spare (0: none)
    warmup_lengths: tuple[int, ...] = ()  # startup decodes of each, the fastest timed like a batch

    def decode_batch(self) -> int:
        """Most windows in one decode batch: 1 where batching is off, else ``max_batch``."""
        return 1 if self.batching == "off" else self.max_batch

    def packs(self, accelerator: bool) -> bool:
        """Whether windows of different lengths share a decode batch, packed into one call
        (``app.families.neucodec.codec.packed``): ``auto`` on a CPU. Elsewhere a batch is windows of one
        length (an accelerator's graphs are captured by shape)."""
        return self.batching == "auto" and not accelerator

    def decode_budget(self, accelerator: bool) -> int | None:
        """Most codes in one decode batch (None: no bound but ``decode_batch``). Where windows are packed:
        ``cpu_batch_codes`` (a longer window runs alone). A decode's fixed cost (reading the weights, each
        operator's set-up) is what a batch shares; a long window keeps the cores busy on its own, and
        batching it would only delay the most urgent window of the batch."""
        return self.cpu_batch_codes if self.packs(accelerator) else None


def _one_key(window: list[int]) -> int:
    """The decode batcher's key where windows of any lengths are packed: all alike."""
    return 0


def _forward(decoder: NeuCodecDecoder, ops: DeviceOps, compile: bool) -> Forward:
    """The decoder's forward, compiled with torch.compile (inductor) when asked."""
    if not compile:
        return decoder
    return torch.compile(decoder, dynamic=not ops.is_accelerator)  # cpu: one graph for all shapes


class CodecWorker:
    """Batched codec service: ``await decode(codes)`` -> audio; ``await encode(audio_16k)`` -> codes."""

    def __init__(
        self,
        decoder: NeuCodecDecoder,
        device: torch.device | str | DeviceOps,
        *,
        encoder: NeuCodecEncoder | None = None,
        options: CodecOptions | None = None,
        observer: BatchObserver | None = None,
        spans: SpanRecorder | None = None,
        decoded: Callable[[float, float], None] | None = None,
        cost: Callable[[], tuple[float, float] | None] | None = None,
    ) -> None:
        self.options = options or CodecOptions()
        self._decoded = decoded  # (audio seconds, decode seconds) after every decode batch
        self._cost = cost  # (fixed s, s a code) of a decode batch as measured; None: not known
        self._codebook_size = decoder.config.codebook_size
        self._encoder = encoder
        self.ops = device if isinstance(device, DeviceOps) else DeviceOps(device)
        opts = self.options
        graphs = None
        if opts.cuda_graphs and self.ops.supports_graphs and not opts.compile:
            graphs = GraphPool(decoder, self.ops.device, opts.graph_batch_sizes, opts.max_graphs)
        packs = opts.packs(self.ops.is_accelerator)
        packed = decoder.forward_packed if packs else None
        self.runner = DecodeRunner(_forward(decoder, self.ops, opts.compile), self.ops, graphs, packed)
        self.decoder_batcher: Batcher[list[int], np.ndarray, PreparedBatch] = Batcher(
            "decode",
            key=_one_key if packs else len,
            prepare=self.runner.prepare,
            run=self._run_decode,
            max_batch=opts.decode_batch(),
            weight=len,
            budget=opts.decode_budget(self.ops.is_accelerator),
            ends=self._batch_ends if packs and opts.cover > 0 and cost is not None else None,
            deadlines=opts.deadlines,
            bind_thread=self.runner.bind_thread,
            warmup=self._warm_up,
            observer=observer,
            spans=spans,
            timeout_s=opts.timeout_s,
            window_s=opts.window_s,
        )
        self.encoder_batcher: Batcher[np.ndarray, list[int], list[np.ndarray]] | None = None
        if encoder is not None:
            self.encoder_batcher = Batcher(
                "encode",
                key=lambda audio: 0,  # the encoder groups by padded length itself
                prepare=list,
                run=self._run_encode,
                max_batch=opts.max_encode_batch,
                bind_thread=self.ops.bind_thread,
                observer=observer,
                spans=spans,
                timeout_s=opts.timeout_s,
                window_s=opts.window_s,
            )

    @property
    def running(self) -> bool:
        """True between ``start()`` and ``close()``."""
        return self.decoder_batcher.running

    @property
    def can_encode(self) -> bool:
        """True when the worker was given an encoder."""
        return self._encoder is not None

    def _batch_ends(self, codes: int) -> float | None:
        """When a decode batch of ``codes`` codes started now would end, ``cover`` times its measured cost
        (``time.monotonic()`` s); None before any cost was measured."""
        line = self._cost() if self._cost is not None else None
        if line is None:
            return None
        fixed_s, per_code_s = line
        return time.monotonic() + self.options.cover * (fixed_s + per_code_s * codes)

    def start(self) -> None:
        """Start the batchers' threads. On cuda with graphs, the decode worker first captures the
        startup graphs (decodes queue meanwhile)."""
        self.decoder_batcher.start()
        if self.encoder_batcher is not None:
            self.encoder_batcher.start()

    async def decode(self, codes: Sequence[int], deadline: float | None = None) -> np.ndarray:
        """Decode speech codes to float32 audio of shape ``(len(codes) * hop_length,)``, due at
        ``deadline`` (``time.monotonic()`` seconds: when the listener runs out of audio; None: now).

        Raises ValueError for codes out of range, BatcherClosed (503) once ``close()`` has begun, BatchTimeout
        past ``timeout_s``. Cancelling the caller before its item is batched skips its computation.
        """
        window = [int(code) for code in codes]  # a copy: the caller may reuse its buffer
        if not window:
            return np.zeros(0, dtype=np.float32)
        low, high = min(window), max(window)
        if low < 0 or high >= self._codebook_size:
            bad = low if low < 0 else high
            raise ValueError(f"speech code {bad} is out of range [0, {self._codebook_size - 1}]")
        return await self.decoder_batcher.submit(window, deadline)

    async def encode(self, audio_16k: np.ndarray) -> list[int]:
        """Encode mono 16 kHz audio ``(S,)`` to ``S // 320`` speech codes in [0, codebook_size).

        Raises EncoderUnavailable without an encoder, ValueError for audio that is not 1-D, shorter
        than 320 samples (20 ms) or not finite, BatcherClosed once ``close()`` has begun.
        """
        if self.encoder_batcher is None:
            raise EncoderUnavailable("speech encoding is not available: the codec encoder is not loaded")
        audio = np.array(audio_16k, dtype=np.float32)  # a copy, like decode's codes
        if audio.ndim != 1 or audio.shape[0] < MIN_SAMPLES:
            raise ValueError(f"audio must be 1-D with at least {MIN_SAMPLES} samples, got {audio.shape}")
        if not np.isfinite(audio).all():
            raise ValueError("audio contains NaN or infinite samples")
        return await self.encoder_batcher.submit(audio)

    async def close(self) -> None:
        """Stop taking work, fail queued items, let the batches in flight finish and join the threads."""
        await self.decoder_batcher.close()
        if self.encoder_batcher is not None:
            await self.encoder_batcher.close()

    def _warm_up(self) -> None:
        """On the decode worker thread, before the first request's decode: the startup CUDA graphs (they
        replay where they were captured), then for each of ``warmup_lengths`` an untimed decode (its
        one-off set-up) and ``WARMUP_RUNS`` timed ones, the fastest reported like a batch, so the decode
        cost the schedules and the admission read is measured from the start."""
        graphs = self.runner.graphs
        if graphs is not None and self.options.graph_lengths:
            keys = [(b, t) for t in self.options.graph_lengths for b in graphs.batch_sizes]
            with torch.inference_mode():
                graphs.capture_all(keys)
            log.info("captured %d CUDA graphs (%d failed)", len(graphs.captured), len(graphs.failed))
        try:
            for n in self.options.warmup_lengths:
                codes = [(i * 7919) % self._codebook_size for i in range(n)]
                # the first call of a length pays its set-up: not timed; run() gives its buffer back, so
                # each call is prepared anew
                runs = [self._timed_decode(self.runner.prepare([codes])) for _ in range(1 + WARMUP_RUNS)]
                if self._decoded is not None:
                    self._decoded(runs[0][2], min(seconds for *_, seconds in runs[1:]))
        except Exception:  # the requests' own decodes will say what is wrong
            log.warning("the codec's warm-up decode failed", exc_info=True)

    def _timed_decode(self, batch: PreparedBatch) -> tuple[list[np.ndarray], bool, float, float]:
        """Decode ``batch``: its rows' audio, whether a graph ran, the audio seconds and the seconds taken."""
        started = time.perf_counter()
        with torch.inference_mode():
            rows, graph = self.runner.run(batch)
        seconds = time.perf_counter() - started
        return rows, graph, sum(row.size for row in rows) / SAMPLE_RATE, seconds

    def _run_decode(self, batch: PreparedBatch) -> tuple[list[np.ndarray | BaseException], bool]:
        rows, graph, audio_s, seconds = self._timed_decode(batch)
        if self._decoded is not None:
            self._decoded(audio_s, seconds)
        return list(rows), graph

    def _run_encode(self, audios: list[np.ndarray]) -> tuple[list[list[int] | BaseException], bool]:
        """Encode waveforms of any lengths in one call: ``[B, 1, S_max]`` zero-padded, lengths given."""
        assert self._encoder is not None  # no encode batcher without an encoder
        lengths = [audio.shape[0] for audio in audios]
        batch = torch.zeros(len(audios), 1, max(lengths))  # the encoder reads only lengths[i] of row i
        for row, audio in enumerate(audios):
            batch[row, 0, : lengths[row]] = torch.from_numpy(audio)
        with torch.inference_mode():
            codes = self._encoder.encode(batch, lengths)  # [B, F] on cpu
        return [codes[row, : frames_for(length)].tolist() for row, length in enumerate(lengths)], False
