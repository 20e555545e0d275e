"""MossCodecService: streamed decodes of many streams, batched across streams, and voice-prompt encodes.

``stream = service.open_stream()`` gives a stream its own decoder state; ``await stream.decode(codes)``
(``[frames, codebooks]``) returns the audio of exactly those frames, ``stream.close()`` frees the state.
The chunks of all streams go through one ``app.codec.batcher.Batcher`` (a collector thread and a worker
thread that owns the device): the chunks waiting together are decoded in one forward, each stream's
state a row of the batch, of any chunk lengths; streams join and leave between batches. A batched chunk
equals its lone decode to float rounding (``MossAudioCodec.decode_step``).

Limits: at most ``max_streams`` streams are open at once (their states are ~180 MB each at full size in
float32); one more is refused with ``TooManyStreams`` (503) before any memory is taken, except through
``open_stream_soon``, which waits for a stream to end (a later part of a response already playing: it
must not fail mid-response) and goes before every later ``open_stream``. A stream decodes one
chunk at a time (concurrent calls queue in order). A chunk that fails or whose caller is cancelled may have
advanced the state or not, so the stream is then broken: its next decode raises ``StreamBroken``.
Closing is immediate; a batch already running keeps the state alive until it ends.

Encodes (reference clip at 24 kHz -> codes ``[frames, num_quantizers]``) have their own batcher, so a
long reference never delays the decodes of playing streams; ``encode_reference`` caches codes by content.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from dataclasses import dataclass

import numpy as np
import torch

from app.codec.batcher import Batcher, BatchObserver, SpanRecorder
from app.codec.moss.model import DecoderState, MossAudioCodec
from app.codec.reference_cache import ReferenceCache
from app.core.device import DeviceOps
from app.core.errors import Unavailable

log = logging.getLogger(__name__)


class TooManyStreams(Unavailable):
    """503: the codec already holds ``max_streams`` stream states (MOSS_CODEC_MAX_STREAMS)."""

    code = "codec_streams_exhausted"


class StreamBroken(RuntimeError):
    """A chunk of this stream failed or was abandoned; its state is undefined, so it decodes no more."""


class StreamClosed(RuntimeError):
    """The stream was closed; it decodes no more."""


class EncoderUnavailable(Unavailable):
    """503: the codec was loaded without its encoder (voice prompts disabled)."""


@dataclass(frozen=True)
class MossCodecOptions:
    """How the service batches and bounds work; the engine fills it from Settings."""

    max_streams: int = 16  # MOSS_CODEC_MAX_STREAMS
    window_s: float = 0.002  # BATCH_WINDOW_MS
    max_batch: int = 16  # MAX_BATCH_SIZE
    timeout_s: float = 60.0  # BATCH_TIMEOUT
    max_encode_batch: int = 8  # MAX_ENCODE_BATCH
    num_quantizers: int = 16  # codebooks a voice prompt is encoded with (MOSS-TTS-Realtime reads 16)
    reference_cache_size: int = 256  # REFERENCE_CACHE_SIZE


@dataclass
class _Chunk:
    state: DecoderState
    codes: torch.Tensor  # [T, nq] int64, on the host


class MossStream:
    """One stream's decoder (see module docstring). Not thread-safe: use it from one event loop."""

    def __init__(self, service: MossCodecService, number: int, state: DecoderState) -> None:
        self.number = number
        self._service = service
        self._state = state
        self._lock = asyncio.Lock()
        self.closed = False
        self.broken = False

    @property
    def frames(self) -> int:
        """Frames decoded so far."""
        return self._state.frames

    @property
    def state_bytes(self) -> int:
        """Bytes of decoder state held (0 once closed)."""
        return self._state.nbytes

    async def decode(self, codes: np.ndarray | torch.Tensor) -> np.ndarray:
        """Codes ``[T, nq]`` -> float32 audio ``[T * 1920]`` following this stream's previous chunks.

        Raises ValueError for bad codes (the stream stays usable), StreamClosed, StreamBroken, and what
        the batcher raises (BatcherClosed, BatchTimeout: the stream is then broken).
        """
        chunk = self._service.check_codes(codes)
        async with self._lock:
            if self.closed:
                raise StreamClosed(f"MOSS codec stream {self.number} is closed")
            if self.broken:
                raise StreamBroken(f"MOSS codec stream {self.number} lost a chunk; open a new stream")
            if chunk.shape[0] == 0:
                return np.zeros(0, dtype=np.float32)
            try:
                return await self._service.decode_batcher.submit(_Chunk(self._state, chunk))
            except BaseException:
                self.broken = True
                raise

    def close(self) -> None:
        """Free the state and the stream's slot (idempotent)."""
        if not self.closed:
            self.closed = True
            self._state.release()
            self._service._forget(self)


class MossCodecService:
    """Batched MOSS codec on one device: ``open_stream()``, ``encode(audio)``, ``encode_reference``."""

    def __init__(
        self,
        codec: MossAudioCodec,
        device: torch.device | str | DeviceOps,
        *,
        options: MossCodecOptions | None = None,
        observer: BatchObserver | None = None,
        spans: SpanRecorder | None = None,
    ) -> None:
        self.codec = codec
        self.options = opts = options or MossCodecOptions()
        if opts.max_streams < 1:
            raise ValueError(f"max_streams must be >= 1, got {opts.max_streams}")
        if not 1 <= opts.num_quantizers <= codec.config.num_quantizers:
            raise ValueError(f"num_quantizers must be in [1, {codec.config.num_quantizers}]")
        self.ops = device if isinstance(device, DeviceOps) else DeviceOps(device)
        self._streams: dict[int, MossStream] = {}
        self._numbers = itertools.count()
        self._waiters: deque[asyncio.Future[None]] = deque()  # open_stream_soon calls waiting, FIFO
        self._handed = 0  # slots handed to a woken waiter that has not opened its stream yet
        self.references = ReferenceCache(opts.reference_cache_size, code_values=codec.config.codebook_size)
        common = {
            "observer": observer,
            "spans": spans,
            "timeout_s": opts.timeout_s,
            "window_s": opts.window_s,
        }
        self.decode_batcher: Batcher[_Chunk, np.ndarray, list[_Chunk]] = Batcher(
            "moss_decode",
            key=lambda chunk: 0,  # chunks of any lengths share a batch (rows are packed, never padded)
            prepare=list,
            run=self._run_decode,
            max_batch=opts.max_batch,
            bind_thread=self.ops.bind_thread,
            **common,  # type: ignore[arg-type]
        )
        self.encode_batcher: Batcher[np.ndarray, np.ndarray, list[np.ndarray]] | None = None
        if codec.encoder is not None:
            self.encode_batcher = Batcher(
                "moss_encode",
                key=lambda audio: 0,
                prepare=list,
                run=self._run_encode,
                max_batch=opts.max_encode_batch,
                bind_thread=self.ops.bind_thread,
                **common,  # type: ignore[arg-type]
            )

    @property
    def live_streams(self) -> int:
        """Streams open now."""
        return len(self._streams)

    @property
    def can_encode(self) -> bool:
        return self.encode_batcher is not None

    def start(self) -> None:
        """Start the batchers' threads."""
        self.decode_batcher.start()
        if self.encode_batcher is not None:
            self.encode_batcher.start()

    async def close(self) -> None:
        """Close every stream, stop taking work, let the batches in flight finish, join the threads."""
        for stream in list(self._streams.values()):
            stream.close()
        await self.decode_batcher.close()
        if self.encode_batcher is not None:
            await self.encode_batcher.close()

    def open_stream(self) -> MossStream:
        """A new stream with fresh state; TooManyStreams when ``max_streams`` are open or promised to
        ``open_stream_soon`` callers."""
        taken = len(self._streams) + len(self._waiters) + self._handed
        if taken >= self.options.max_streams:
            raise TooManyStreams(
                f"the MOSS codec already decodes {len(self._streams)} streams "
                f"(MOSS_CODEC_MAX_STREAMS={self.options.max_streams}); try again when one ends"
            )
        return self._new_stream()

    async def open_stream_soon(self) -> MossStream:
        """A new stream, waiting (FIFO) for one to end when ``max_streams`` are open."""
        if len(self._streams) + len(self._waiters) + self._handed < self.options.max_streams:
            return self._new_stream()
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif waiter.done() and not waiter.cancelled():  # a slot was handed to it: pass it on
                self._handed -= 1
                self._hand_over()
            raise
        self._handed -= 1
        return self._new_stream()

    def _new_stream(self) -> MossStream:
        number = next(self._numbers)
        stream = MossStream(self, number, self.codec.new_state())
        self._streams[number] = stream
        return stream

    def _forget(self, stream: MossStream) -> None:
        if self._streams.pop(stream.number, None) is not None:
            self._hand_over()

    def _hand_over(self) -> None:
        """Give a freed slot to the first waiter still waiting."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._handed += 1
                waiter.set_result(None)
                return

    def check_codes(self, codes: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Codes as a host int64 tensor ``[T, nq]`` (a copy); ValueError for a bad shape or value."""
        config = self.codec.config
        chunk = torch.as_tensor(np.asarray(codes) if not isinstance(codes, torch.Tensor) else codes)
        if chunk.dim() != 2 or not 1 <= chunk.shape[1] <= config.num_quantizers:
            raise ValueError(
                f"codes must be [frames, codebooks] with 1..{config.num_quantizers} codebooks, "
                f"got shape {tuple(chunk.shape)}"
            )
        if chunk.dtype.is_floating_point or chunk.dtype == torch.bool:
            raise ValueError(f"codes must be integers, got {chunk.dtype}")
        chunk = chunk.to("cpu", torch.int64, copy=True)
        if chunk.numel() and (int(chunk.min()) < 0 or int(chunk.max()) >= config.codebook_size):
            raise ValueError(f"codes must be in [0, {config.codebook_size})")
        return chunk

    def _run_decode(self, chunks: list[_Chunk]) -> tuple[list[np.ndarray | BaseException], bool]:
        """Worker thread: one batched step of every chunk whose stream is still open."""
        results: list[np.ndarray | BaseException] = [StreamClosed("the stream was closed")] * len(chunks)
        live = [i for i, chunk in enumerate(chunks) if not chunk.state.released]
        if live:
            device = self.codec.device
            audio = self.codec.decode_step(
                [chunks[i].codes.to(device) for i in live], [chunks[i].state for i in live]
            )
            for i, piece in zip(live, audio, strict=True):
                results[i] = piece.float().cpu().numpy()
        return results, False

    async def encode(self, audio_24k: np.ndarray) -> np.ndarray:
        """Mono 24 kHz float audio ``(S,)`` -> codes ``[S // 1920, num_quantizers]`` (int64).

        Raises EncoderUnavailable without an encoder; ValueError for audio that is not 1-D, shorter than a
        frame or not finite.
        """
        if self.encode_batcher is None:
            raise EncoderUnavailable("voice prompts are not available: the MOSS codec encoder is not loaded")
        audio = np.array(audio_24k, dtype=np.float32)
        frame = self.codec.samples_per_frame
        if audio.ndim != 1 or audio.shape[0] < frame:
            raise ValueError(f"audio must be 1-D with at least {frame} samples, got {audio.shape}")
        if not np.isfinite(audio).all():
            raise ValueError("audio contains NaN or infinite samples")
        return await self.encode_batcher.submit(audio)

    async def encode_reference(self, samples_24k: np.ndarray, digest: str) -> np.ndarray:
        """``encode`` through the content cache: ``digest`` (e.g. SHA-256 of the samples) -> codes."""
        nq = self.options.num_quantizers

        async def flat(audio: np.ndarray) -> list[int]:
            return (await self.encode(audio)).reshape(-1).tolist()

        codes = await self.references.get_or_encode(f"moss:{nq}:{digest}", samples_24k, flat)
        return np.asarray(codes, dtype=np.int64).reshape(-1, nq)

    def _run_encode(self, audios: list[np.ndarray]) -> tuple[list[np.ndarray | BaseException], bool]:
        """Worker thread: every clip in one packed forward (the encoder is causal: no padding effects)."""
        clips = [torch.from_numpy(audio) for audio in audios]
        codes = self.codec.encode(clips, self.options.num_quantizers)
        return [c.cpu().numpy() for c in codes], False
