"""The MOSS-TTS-Realtime frame engine: one thread owns the model and advances every active request together.

The thread loops:

1. take new requests off the queue into a FIFO wait list;
2. drop the rows whose stream was closed (a cancelled request leaves within one step);
3. admit the head of the wait list while a row is free (``max_batch``) and the backbone cache budget
   (``max_cached_rows``: rows x padded width, each row counted at its prefill plus ``max_frames``) holds;
   beyond either it waits (at most ``max_waiting`` new requests wait; more are refused with 429, while
   work of a response already admitted, a long input's later part, always waits its turn), so the cache
   never grows past the budget;
4. run one prefill chunk of the prefill group: up to ``prefill_rows`` (default ``max_batch``) admitted
   rows prefilled TOGETHER, their prompts left-padded to the longest (padding masked, each row at its own
   positions, like the batch; never more than half of the group's columns padding:
   ``app.lm.padded_cache.PrefillGroup``), in chunks of ``prefill_chunk`` rows in all
   (``prefill_chunk // group size`` columns each); after the last chunk the group makes its frame 0 (16
   local sub-steps, batched) and joins the batch;
5. run one step over the batch: ONE backbone forward over every row's new row ``[text, previous frame]``
   (per-row positions, left-padded cache), then 16 local sub-steps batched over the rows, each followed
   by the rows' sampling, batched (``sampling.choose_codes``) but with every row's own parameters,
   ``torch.Generator`` and repetition history; rows that sampled EOS on codebook 0 or reached
   ``max_frames`` leave.

**Prefill policy.** Requests admitted together are prefilled together, and a prefill chunk alternates
with a batch step. One at a time (``prefill_rows=1``, the former policy), the k-th of n simultaneous
requests waited for k prefills, k frame-0 passes and k - 1 batch steps, so the last one's first frame
came after all the others'. In one group every forward reads the weights once for all members and frame
0 is one batched local pass, so all members' first frames come together, after the group's cost. On a
compute-bound CPU that cost is close to the sum of the separate prefills, so grouping trades the median
first frame for the worst one (bench/moss_lm_bench.py, 8 requests: median 17.4 -> 22.8 s, max 34.7 ->
22.8 s, frames/s of the run 2.00 -> 2.64); on an accelerator a group of a few short prompts costs little
more than one, so it should lower both. We default to grouping because the worst wait is what a service
bounds, and the throughput of the run rises too. The chunk budget counts the rows of ALL members, so a
running stream still waits at most one ``prefill_chunk``-row forward between two of its frames, however
many join (tested). Rows admitted while a group prefills form the next group (FIFO: none is overtaken).

The forwards (``MossTTSRealtime.backbone``, ``LocalTransformer.step``) contain no sampling and no host
synchronisation, so a CUDA/NPU graph could capture them later; sampling (``sampling.choose_codes``) runs
between them, on the device too: one host read per step (the frames, to post them and see EOS). A
request's frames depend only on its own job and seed, not on who shares its steps or its prefill (tested:
batched equals alone, float32). A failure in one row's sampling fails that row alone; a failure of a
shared forward (a group's prefill, the batch step) fails the rows of that forward.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections import deque
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

import numpy as np
import torch

from app.core.device import set_current
from app.core.errors import APIError, BackendError, InvalidRequest, RateLimited, Unavailable
from app.lm.job_queue import take_queued
from app.lm.moss.loader import LoadedMoss
from app.lm.moss.local import LocalCache
from app.lm.moss.sampling import RowParams, choose_codes
from app.lm.moss.types import AUDIO_EOS, CODEBOOKS, COLUMNS, FrameJob
from app.lm.padded_cache import PaddedBatch, PrefillGroup


@dataclass
class _End:
    """The last item of a row's queue: None when it ended normally, else the error to raise."""

    error: APIError | None = None


@dataclass(eq=False)
class _Row:
    """One request: the way back to its event loop and, inside the thread, its generation state."""

    job: FrameJob
    loop: asyncio.AbstractEventLoop
    out: asyncio.Queue[np.ndarray | _End] = field(default_factory=asyncio.Queue)
    done: asyncio.Event = field(default_factory=asyncio.Event)  # set once the thread has left the row
    cancel: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)
    # thread-side state
    prefill: torch.Tensor | None = None  # [1, T, 17]
    tail: list[int] = field(default_factory=list)  # text ids fed with steps 1, 2, ...
    history: torch.Tensor | None = None  # [max_frames, 16] frames made so far (repetition penalty, input)
    generator: torch.Generator | None = None
    length: int = 0  # rows in its cache (set once prefilled)
    frames: int = 0  # frames made (and posted)

    @property
    def reserved(self) -> int:
        """Backbone cache rows this request may need."""
        return int(self.job.prefill.shape[0]) + self.job.max_frames

    def post(self, item: np.ndarray | _End) -> None:
        """From the thread: hand an item to the consumer (a closed loop cancels the row)."""
        try:
            self.loop.call_soon_threadsafe(self.out.put_nowait, item)
        except RuntimeError:
            self.cancel.set()

    def finish(self, error: APIError | None = None) -> None:
        """From the thread: post the end and let the consumer's ``aclose`` return."""
        self.post(_End(error))
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
            self.loop.call_soon_threadsafe(self.done.set)


class _Batch(PaddedBatch[_Row]):
    """The rows in the batched step and their shared left-padded backbone cache (``width`` columns)."""


class _Group(PrefillGroup[_Row]):
    """Rows prefilled together (``inputs`` [G, L, 17])."""


class MossFrameEngine:
    """Streams frames for ``FrameJob``s, many at once, on one loaded model (see the module docstring).

    ``max_cached_rows`` bounds the backbone KV cache: ``row_bytes()`` each (112 KiB per row in bfloat16
    at the released size, 224 KiB in float32), so the default 32768 rows is 3.7 GB in bfloat16.
    """

    def __init__(
        self,
        loaded: LoadedMoss,
        *,
        max_batch: int = 8,
        max_cached_rows: int = 32768,
        max_waiting: int = 32,
        prefill_chunk: int = 256,
        prefill_rows: int | None = None,
    ) -> None:
        prefill_rows = max_batch if prefill_rows is None else prefill_rows
        if min(max_batch, max_cached_rows, prefill_chunk, prefill_rows) < 1 or max_waiting < 0:
            raise ValueError("max_batch, max_cached_rows, prefill_chunk and prefill_rows must be positive")
        self.loaded = loaded
        self.max_batch = max_batch
        self.max_cached_rows = max_cached_rows
        self.max_waiting = max_waiting
        self.prefill_chunk = prefill_chunk
        self.prefill_rows = prefill_rows
        model = loaded.model
        self._tensors = model.local_transformer.model.norm.weight.device  # where inputs are made
        self._jobs: queue.Queue[_Row | None] = queue.Queue()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._pending = 0  # submitted, not yet admitted (bounded by max_waiting)
        self._local: LocalCache | None = None
        self.steps = 0  # batched steps run so far (tests, bench)
        self.peak_rows = 0  # most rows stepped together so far
        self.peak_group = 0  # most rows prefilled together so far
        self.active = 0  # rows admitted and not finished

    # --- the event-loop side -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread that owns the model (idempotent)."""
        if self._thread is not None:
            return
        self._closing.clear()
        self._thread = threading.Thread(target=self._serve, name="moss-frames", daemon=True)
        self._thread.start()

    async def close(self) -> None:
        """End every open stream with Unavailable and join the thread."""
        if self._thread is None:
            return
        with self._lock:
            self._closing.set()
            self._jobs.put(None)
        await asyncio.to_thread(self._thread.join)
        self._thread = None

    def row_bytes(self) -> int:
        """Bytes of backbone keys and values one cached row takes."""
        language = self.loaded.model.config.language
        head_dim = int(language.get("head_dim") or language["hidden_size"] // language["num_attention_heads"])
        kv_heads = int(language.get("num_key_value_heads") or language["num_attention_heads"])
        per_value = torch.empty((), dtype=self.loaded.dtype).element_size()
        return 2 * int(language["num_hidden_layers"]) * kv_heads * head_dim * per_value

    def ready(self) -> bool:
        """True while the thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def details(self) -> dict[str, object]:
        """What runs where, for readiness and logs."""
        loaded = self.loaded
        accelerator = loaded.device.type != "cpu"
        return {
            "device": str(loaded.device),
            "dtype": str(loaded.dtype).removeprefix("torch."),
            "attention": loaded.attention,
            "max_batch": self.max_batch,
            "prefill_rows": self.prefill_rows,
            "max_cached_rows": self.max_cached_rows,
            "cache_bytes": self.max_cached_rows * self.row_bytes(),
            "why": (
                "bfloat16 and sdpa by default on an accelerator"
                if accelerator
                else "float32 on cpu by default (exact; sdpa gives eager's frames and is not slower)"
            ),
        }

    def _check(self, job: FrameJob) -> None:
        """Refuse, before anything runs, a job this engine can never serve."""
        rows = int(job.prefill.shape[0])
        if job.prefill.ndim != 2 or job.prefill.shape[1] != COLUMNS or rows == 0:
            raise InvalidRequest(f"a MOSS job's prefill must be (T, {COLUMNS}) rows")
        if job.max_frames < 1:
            raise InvalidRequest("max_tokens must be at least 1", param="max_tokens")
        sampling = job.sampling
        if sampling.temperature < 0 or not 0 < sampling.top_p <= 1 or sampling.repetition_penalty <= 0:
            raise InvalidRequest("temperature must be >= 0, top_p in (0, 1] and repetition_penalty > 0")
        if sampling.repetition_window < 0:
            raise InvalidRequest("repetition_window must be >= 0")
        needed = rows + job.max_frames
        if needed > self.loaded.max_positions:
            raise InvalidRequest(
                f"the prompt ({rows} rows) plus max_tokens ({job.max_frames}) exceeds the model's "
                f"{self.loaded.max_positions} positions",
                param="max_tokens",
            )
        if needed > self.max_cached_rows:
            raise InvalidRequest(
                f"the prompt ({rows} rows) plus max_tokens ({job.max_frames}) exceeds this server's "
                f"cache budget of {self.max_cached_rows} rows",
                param="max_tokens",
            )

    def _submit(self, row: _Row, admitted: bool) -> None:
        with self._lock:
            if self._closing.is_set() or self._thread is None:
                raise Unavailable("the MOSS frame engine is not running")
            if not admitted and self._pending + self.active >= self.max_batch + self.max_waiting:
                raise RateLimited(
                    "every MOSS generation slot is busy and the wait queue is full",
                    headers={"Retry-After": "1"},
                )
            self._pending += 1
            self._jobs.put(row)

    async def stream(self, job: FrameJob, *, admitted: bool = False) -> AsyncGenerator[np.ndarray, None]:
        """Frames (n, 16) int64 as they are made; ends at EOS or ``job.max_frames``. Closing the generator
        removes the row within one step; this row's failure raises here. A new request is refused (429)
        when ``max_waiting`` already wait; ``admitted`` work (a later part of a response that has started)
        waits its turn however many do."""
        self._check(job)
        row = _Row(job, asyncio.get_running_loop())
        self._submit(row, admitted)
        ended = False
        try:
            while True:
                item = await row.out.get()
                frames: list[np.ndarray] = []
                while True:
                    if isinstance(item, _End):
                        ended = True
                        break
                    frames.append(item)
                    if row.out.empty():
                        break
                    item = row.out.get_nowait()
                if frames:
                    yield np.concatenate(frames)
                if ended:
                    assert isinstance(item, _End)
                    if item.error is not None:
                        raise item.error
                    return
        finally:
            if not ended:
                row.cancel.set()
                if row.started.is_set():
                    await row.done.wait()

    # --- the thread ----------------------------------------------------------------------------------

    def _serve(self) -> None:
        loaded = self.loaded
        set_current(loaded.device)
        waiting: deque[_Row] = deque()
        admitted: deque[_Row] = deque()  # admitted, waiting for the next prefill group
        group = _Group()  # prefilling now
        batch = _Batch()
        end: APIError = Unavailable("the MOSS frame engine is shutting down")
        try:
            with torch.inference_mode():
                self._local = loaded.model.local_transformer.new_cache(self.max_batch)
                while True:
                    idle = not (waiting or admitted or group.rows or batch.rows)
                    if not take_queued(self._jobs, waiting.append, block=idle) or self._closing.is_set():
                        break
                    self._drop_cancelled(waiting, admitted, group, batch)
                    self._admit(waiting, admitted, group, batch)
                    if not group.rows and admitted:
                        self._form_group(admitted, group)
                    if group.rows:
                        self._prefill_step(group, batch)
                    if batch.rows:
                        self._step(batch)
        except Exception as exc:  # a bug outside any row's work: fail every row rather than hang them
            end = BackendError(f"the MOSS frame engine stopped: {exc!r}")
        with self._lock:
            self._closing.set()  # nothing new is queued from here on
        while True:  # rows queued but not taken yet
            try:
                late = self._jobs.get_nowait()
            except queue.Empty:
                break
            if late is not None:
                waiting.append(late)
        for row in [*waiting, *admitted, *group.rows, *batch.rows]:
            row.finish(end)

    def _leave(self, row: _Row, error: APIError | None = None) -> None:
        with self._lock:
            self.active -= 1
        row.finish(error)

    def _drop_cancelled(
        self, waiting: deque[_Row], admitted: deque[_Row], group: _Group, batch: _Batch
    ) -> None:
        """Finish the rows whose stream was closed before the next forward."""
        for row in [row for row in waiting if row.cancel.is_set()]:
            waiting.remove(row)
            with self._lock:
                self._pending -= 1
            row.finish()
        for row in [row for row in admitted if row.cancel.is_set()]:
            admitted.remove(row)
            self._leave(row)
        quit = [row for row in group.rows if row.cancel.is_set()]
        for row in quit:
            self._leave(row)
        if quit:
            group.drop(quit)
        gone = [row for row in batch.rows if row.cancel.is_set()]
        for row in gone:
            self._leave(row)
        if gone:
            batch.remove(gone)

    def _admit(self, waiting: deque[_Row], admitted: deque[_Row], group: _Group, batch: _Batch) -> None:
        """Admit waiting rows in arrival order while a row and the cache budget are free."""
        while waiting:
            row = waiting[0]
            active = [*admitted, *group.rows, *batch.rows]
            if len(active) >= self.max_batch:
                return
            widest = max([row.reserved, *(other.reserved for other in active)])
            if active and (len(active) + 1) * widest > self.max_cached_rows:
                return  # waits for rows to leave
            waiting.popleft()
            with self._lock:
                self._pending -= 1
                self.active += 1
            row.started.set()
            try:
                self._prepare(row)
            except Exception as exc:
                self._leave(row, _failure(exc))
                continue
            admitted.append(row)

    def _prepare(self, row: _Row) -> None:
        job, device = row.job, self._tensors
        row.prefill = torch.from_numpy(np.ascontiguousarray(job.prefill, dtype=np.int64)).to(device)[None]
        row.tail = list(job.text_tail)
        row.history = torch.zeros((job.max_frames, CODEBOOKS), dtype=torch.long, device=device)
        if job.sampling.seed is not None:
            row.generator = torch.Generator(device=device).manual_seed(job.sampling.seed)

    def _form_group(self, admitted: deque[_Row], group: _Group) -> None:
        """The next prefill group: up to ``prefill_rows`` admitted rows in arrival order, left-padded."""
        group.form(admitted, self.prefill_rows, _prompt)
        self.peak_group = max(self.peak_group, len(group.rows))

    def _prefill_step(self, group: _Group, batch: _Batch) -> None:
        """One chunk of the group's prefill (``prefill_chunk`` rows in all); after the last, frame 0 of
        every member and the join of those that go on."""
        rows = group.rows
        inputs, mask, positions = group.next_chunk(self.prefill_chunk)
        try:
            hidden, cache = self.loaded.model.backbone(inputs, group.cache, mask, positions)
        except Exception as exc:
            for row in rows:
                self._leave(row, _failure(exc))
            group.reset()
            return
        if not group.advance(cache, int(inputs.shape[1])):
            return
        try:
            codes, host, failed = self._frame(hidden, rows)
        except Exception as exc:
            for row in rows:
                self._leave(row, _failure(exc))
            group.reset()
            return
        group.hand_over(batch, self._deliver_all(rows, codes, host, failed))
        self.peak_rows = max(self.peak_rows, len(batch.rows))

    def _step(self, batch: _Batch) -> None:
        """One backbone forward over every row, 16 local sub-steps, each row's sampling."""
        rows = batch.rows
        device = self._tensors
        text_pad = self.loaded.ids.text_pad
        texts = []
        for row in rows:
            k = row.frames - 1  # the frame fed now; the text id beside it
            texts.append(row.tail[k] if k < len(row.tail) else text_pad)
        audio = torch.stack([row.history[row.frames - 1] for row in rows])  # type: ignore[index]  # set by _prepare
        text = torch.tensor(texts, dtype=torch.long, device=device)
        inputs = torch.cat([text[:, None], audio], dim=1)[:, None]  # [B, 1, 17]
        mask = None  # rows of one length: the plain causal path
        if any(row.length < batch.width for row in rows):
            padding = torch.zeros((len(rows), batch.width + 1), dtype=torch.long)
            for i, row in enumerate(rows):
                padding[i, batch.width - row.length :] = 1
            mask = padding.to(device)
        positions = torch.tensor([[row.length] for row in rows], device=device)
        try:
            hidden, batch.cache = self.loaded.model.backbone(inputs, batch.cache, mask, positions)
            codes, host, failed = self._frame(hidden, rows)
        except Exception as exc:
            for row in rows:
                self._leave(row, _failure(exc))
            batch.rows, batch.cache, batch.width = [], None, 0
            return
        self.steps += 1
        batch.width += 1
        for row in rows:
            row.length += 1
        done = self._deliver_all(rows, codes, host, failed)
        if done:
            batch.remove(done)

    def _deliver_all(
        self, rows: list[_Row], codes: torch.Tensor, host: np.ndarray, failed: dict[int, Exception]
    ) -> list[_Row]:
        """Hand each row its frame, or its failure; the rows that left (failed, finished, cancelled)."""
        done = []
        for i, row in enumerate(rows):
            if i in failed:
                self._leave(row, _failure(failed[i]))
                done.append(row)
            elif not self._deliver(row, codes[i], host[i]):
                done.append(row)
        return done

    def _frame(
        self, hidden: torch.Tensor, rows: list[_Row]
    ) -> tuple[torch.Tensor, np.ndarray, dict[int, Exception]]:
        """The next frame of each row from its backbone state ``hidden`` [B, H]: 16 local forwards over
        the rows, each followed by the rows' sampling in one batched call (``choose_codes``: each row its
        own settings, repetition window and generator). A row whose draw raised gets its exception
        instead (the others go on; its later codes are placeholders). Returns the frames [B, 16] on the
        device and on the host (the step's one host read), and the failed rows."""
        local = self.loaded.model.local_transformer
        assert self._local is not None
        device = hidden.device
        params = RowParams.of([row.job.sampling for row in rows], device)
        generators = [row.generator for row in rows]
        recent = _recent(rows, device)
        codes = torch.zeros((len(rows), CODEBOOKS), dtype=torch.long, device=device)
        failed: dict[int, Exception] = {}
        x = hidden
        for head in range(CODEBOOKS):
            if head:
                x = local.embed(head, codes[:, head - 1])
            logits = local.step(head, x, self._local)
            codes[:, head], bad = choose_codes(logits, head, recent[:, :, head], params, generators)
            for i, exc in bad.items():
                failed.setdefault(i, exc)
        return codes, codes.cpu().numpy(), failed

    def _deliver(self, row: _Row, frame: torch.Tensor, host: np.ndarray) -> bool:
        """Post a row's new frame (``frame`` on the device, ``host`` its copy), or end it (EOS on codebook
        0, max_frames); False once it has ended."""
        assert row.history is not None
        if host[0] == AUDIO_EOS:
            self._leave(row)
            return False
        row.history[row.frames] = frame
        row.frames += 1
        row.post(host[None].copy())
        if row.frames >= row.job.max_frames:
            self._leave(row)
            return False
        return True


def _prompt(row: _Row) -> torch.Tensor:
    """The row's prefill ``[1, T, 17]`` (set by ``_prepare``)."""
    assert row.prefill is not None
    return row.prefill


def _recent(rows: list[_Row], device: torch.device) -> torch.Tensor:
    """Each row's last ``repetition_window`` frames of this turn, right-aligned and padded with -1:
    [B, W, 16] with W the longest window in use."""
    counts = [min(row.frames, max(row.job.sampling.repetition_window, 0)) for row in rows]
    recent = torch.full((len(rows), max(counts), CODEBOOKS), -1, dtype=torch.long, device=device)
    for i, (row, count) in enumerate(zip(rows, counts, strict=True)):
        if count:
            assert row.history is not None
            recent[i, -count:] = row.history[row.frames - count : row.frames]
    return recent


def _failure(exc: Exception) -> APIError:
    """The error a failed row raises: its APIError, or a BackendError naming the exception."""
    if isinstance(exc, APIError):
        return exc
    return BackendError(f"MOSS generation failed: {exc!r}")
