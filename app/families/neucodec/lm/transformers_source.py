"""The embedded LM backend: the NeuCodec TTS LM in-process with Hugging Face transformers.

Loading is ``loading.load_lm``; generation runs on ``engine.SpeechTokenEngine``, the shared batched row
scheduler: one thread owns the model and decodes every active generation in one step (``batch_size``
rows; 1 = one at a time). Codes reach the event loop through each stream's ``Handoff``. Cancellation
sets an event the thread checks before every step, so an abandoned generation stops within one forward.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from app.core.device import resolve_device
from app.core.errors import Unavailable
from app.core.types import FinishReason
from app.families.neucodec.lm.engine import Generation, SpeechTokenEngine
from app.families.neucodec.lm.loading import DTYPES, LoadedLM, load_lm
from app.families.neucodec.lm.types import GenerationParams
from app.lm.attention import FP32_SDPA
from app.observability.tracing import NOOP_SPAN, SpanLike, start_span


class TransformersTokenSource:
    """A ``TokenSource`` running the LM in-process, with every active generation in one decode batch.

    ``model`` is a local directory or a Hugging Face id (the official layout); ``device`` is "" (cuda if
    available, else cpu), "cpu", "cuda[:N]" or "npu[:N]"; ``dtype`` is "auto" (the checkpoint's),
    "float32", "float16" or "bfloat16"; ``attention_fp32`` computes attention in float32 whatever
    ``dtype`` is. ``batch_size`` is the most generations decoded together (1: one at a time);
    ``prefill_rows`` the most prompts prefilled together (None: ``batch_size``); ``prefill_chunk`` the
    most prompt tokens (over all of them) run in one forward between two decode steps; ``cache_tokens``
    bounds the padded KV cache (rows x columns, each row counted at its prompt plus ``max_tokens``): a
    request that would exceed it waits for rows to finish.
    """

    def __init__(
        self,
        model: str,
        device: str,
        dtype: str = "auto",
        name: str = "transformers",
        attention_fp32: bool = False,
        *,
        batch_size: int = 1,
        prefill_chunk: int = 256,
        prefill_rows: int | None = None,
        cache_tokens: int = 32768,
    ) -> None:
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPES)}")
        if min(batch_size, prefill_chunk, cache_tokens, prefill_rows or 1) < 1:
            raise ValueError("batch_size, prefill_chunk, prefill_rows and cache_tokens must be positive")
        self.name = name
        self._model_ref = model
        self._device_name = device
        self._dtype = DTYPES[dtype]
        self._attention = FP32_SDPA if attention_fp32 else "sdpa"
        self._limits = {
            "max_rows": batch_size,
            "prefill_chunk": prefill_chunk,
            "prefill_rows": prefill_rows,
            "cache_budget": cache_tokens,
        }
        self._lm: LoadedLM | None = None
        self.engine: SpeechTokenEngine | None = None

    async def start(self) -> None:
        """Load the model in a worker thread, then start the generation thread (idempotent)."""
        if self.engine is not None:
            return
        device = resolve_device(self._device_name)
        self._lm = await asyncio.to_thread(load_lm, self._model_ref, device, self._dtype, self._attention)
        self.engine = SpeechTokenEngine(self._lm, self.name, **self._limits)
        self.engine.start()

    async def close(self) -> None:
        """Stop the running generations, fail the queued ones with Unavailable, join the thread."""
        if self.engine is None:
            return
        await self.engine.close()
        self.engine = None
        self._lm = None

    @property
    def tokenizer(self) -> Any | None:
        """The model's tokenizer once started (prompt lengths for the interleave window fit), else None."""
        return self._lm.tokenizer if self._lm is not None else None

    async def ready(self) -> bool:
        """True once the model is loaded and the generation thread runs."""
        return self.engine is not None and self.engine.running()

    def generate(self, params: GenerationParams) -> TransformersTokenStream:
        """A stream for one generation; it joins the queue on its first iteration."""
        if self.engine is None:
            raise Unavailable(f"LM source {self.name!r} is not started")
        return TransformersTokenStream(self.engine, params)


class TransformersTokenStream:
    """One generation on a ``TransformersTokenSource``; each ``__anext__`` returns every code chosen
    since the previous one (at least one)."""

    finish_reason: FinishReason | None

    def __init__(self, engine: SpeechTokenEngine, params: GenerationParams) -> None:
        self.finish_reason = None
        self._engine = engine
        self._params = params
        self._job: Generation | None = None
        self._span: SpanLike = NOOP_SPAN  # lm.generate, from the first __anext__ to the end
        self._deltas = 0

    @property
    def prompt_tokens(self) -> int | None:
        """The prompt's length in LM tokens, once the generation thread has tokenized it."""
        return self._job.prompt_tokens if self._job is not None else None

    def __aiter__(self) -> TransformersTokenStream:
        return self

    async def __anext__(self) -> list[int]:
        if self.finish_reason is not None:
            raise StopAsyncIteration
        if self._job is None:
            self._span = start_span("lm.generate", {"lm.url": f"inprocess:{self._engine.name}"})
            self._job = Generation(asyncio.get_running_loop())
            self._engine.submit(self._params, self._job)
            weakref.finalize(self, self._job.cancel.set)  # a stream dropped unclosed stops its generation
        codes = [code for delta in await self._job.next_items() for code in delta]
        if codes:
            self._deltas += 1
            return codes
        ended = self._job.ended
        assert ended is not None
        self.finish_reason = ended.reason
        self._end_span()
        if ended.error is not None:
            raise ended.error
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop the generation; returns once the thread has left it (within one step)."""
        if self.finish_reason is None:
            self.finish_reason = "cancelled"
        self._end_span()
        if self._job is not None:
            await self._job.close()

    def _end_span(self) -> None:
        """End ``lm.generate`` with its outcome (once)."""
        self._span.set({"lm.deltas": self._deltas, "lm.finish_reason": self.finish_reason})
        self._span.end()
        self._span = NOOP_SPAN
