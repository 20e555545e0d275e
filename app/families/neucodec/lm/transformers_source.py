"""The embedded LM backend: Hugging Face transformers in-process, one generation at a time.

A dedicated thread owns the model and runs a KV-cached sampling loop; codes reach the event loop through
``loop.call_soon_threadsafe`` into the stream's ``asyncio.Queue``. Requests queue for the thread in
arrival order (a batched engine is a separate source). Cancellation sets a ``threading.Event`` that the
loop checks before every step, so an abandoned generation stops within one forward pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch

from app import hub
from app.core.device import resolve_device, set_current
from app.core.errors import APIError, BackendError, Unavailable
from app.core.types import FinishReason
from app.families.neucodec.lm.speech_head import SpeechHead, layout_for_cpu
from app.families.neucodec.lm.types import GenerationParams
from app.families.neucodec.speech_tokens import SPEECH_CODES
from app.lm.attention import FP32_SDPA, attention_implementation
from app.lm.padded_cache import new_cache
from app.observability.progress import transformers_tqdm_hook
from app.observability.startup_errors import ModelSourceError
from app.observability.tracing import NOOP_SPAN, SpanLike, start_span

# the files of the official layout fetched from the Hub, and those a directory must hold
LM_FILES = ("*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "*.tiktoken")
LM_REQUIRED = (("config.json",), ("*.safetensors",), ("tokenizer.json", "tokenizer.model", "vocab.json"))
GREEDY_BELOW = 1e-5  # temperatures under this sample greedily (vLLM's _SAMPLING_EPS)
_DTYPES: dict[str, torch.dtype | str] = {
    "auto": "auto",
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def apply_repetition_penalty(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """HF/vLLM repetition penalty: for ``seen`` ids divide positive logits and multiply negative ones."""
    penalized = torch.where(logits > 0, logits / penalty, logits * penalty)
    return torch.where(seen, penalized, logits)


def choose_next(
    logits: torch.Tensor,
    seen: torch.Tensor,
    params: GenerationParams,
    generator: torch.Generator | None = None,
) -> int:
    """Pick the next index of ``logits`` (1-D, float): repetition penalty, then greedy or
    temperature / top-k / top-p sampling with vLLM's semantics (``top_k`` <= 0 and ``top_p`` 1 are off)."""
    if params.repetition_penalty != 1.0:
        logits = apply_repetition_penalty(logits, seen, params.repetition_penalty)
    if params.temperature < GREEDY_BELOW:
        return int(torch.argmax(logits))
    logits = logits / params.temperature
    if params.top_k is not None and 0 < params.top_k < logits.numel():
        kth = torch.topk(logits, params.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if params.top_p is not None and params.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        outside = sorted_probs.cumsum(0) - sorted_probs >= params.top_p  # mass before it already >= top_p
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs.masked_fill(outside, 0.0))
    return int(torch.multinomial(probs, 1, generator=generator))


@dataclass(frozen=True)
class _LoadedLM:
    """The model plus the vocabulary maps the sampling loop needs.

    ``allowed_ids`` holds the LM ids the loop may pick: the 65,536 speech tokens in code order (index =
    code) followed by the stop ids. ``lm_to_allowed`` maps every LM id to its index there, or -1. The
    loops run ``decoder`` (the model without its output layer) and ``head`` (``SpeechHead``: logits over
    ``allowed_ids`` only).
    """

    model: Any
    tokenizer: Any
    device: torch.device
    allowed_ids: torch.Tensor
    lm_to_allowed: torch.Tensor
    decoder: Any
    head: SpeechHead

    @classmethod
    def of(cls, model: Any, tokenizer: Any, device: torch.device, allowed_ids: torch.Tensor) -> _LoadedLM:
        """Wrap a loaded ``model`` (on ``device``, eval mode) whose loop may pick ``allowed_ids`` (on the
        CPU); float32 weights on a CPU are laid out for batched steps (``layout_for_cpu``)."""
        lm_to_allowed = torch.full((model.get_output_embeddings().weight.shape[0],), -1, dtype=torch.long)
        lm_to_allowed[allowed_ids] = torch.arange(len(allowed_ids))
        allowed = allowed_ids.to(device)
        head = SpeechHead(model, allowed)
        layout_for_cpu(model)
        return cls(model, tokenizer, device, allowed, lm_to_allowed.to(device), model.get_decoder(), head)

    def logits(self, **inputs: Any) -> tuple[torch.Tensor, Any]:
        """One forward of the decoder on ``inputs`` (``input_ids`` [B, T], cache, mask, positions) with
        ``use_cache``: the float32 logits over the allowed ids at the last column ``[B, A]`` and the cache
        (a new one of ``GrowingLayer``s when ``past_key_values`` is None)."""
        if inputs.get("past_key_values") is None:
            inputs["past_key_values"] = new_cache(self.model.config)
        out = self.decoder(**inputs, use_cache=True)
        return self.head(out.last_hidden_state[:, -1]), out.past_key_values


def _load(
    model_ref: str, device: torch.device, dtype: torch.dtype | str, attention: str = "sdpa"
) -> _LoadedLM:
    """Load tokenizer and model (blocking; run in a worker thread) and build the id maps.

    ``model_ref`` is resolved by ``app.hub`` (a Hub id is downloaded with progress; a directory must hold
    ``LM_REQUIRED``); transformers' weight-loading bar reports to the current progress task.
    ``attention`` is "sdpa" or "sdpa_fp32" (float32 attention, ``app.lm.attention``).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    directory = hub.resolve(model_ref, LM_FILES, LM_REQUIRED)
    transformers_logging.set_tqdm_hook(transformers_tqdm_hook)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    implementation = attention_implementation(attention)
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=dtype, attn_implementation=implementation)
    model = model.to(device).eval()  # type: ignore[arg-type]  # transformers types .to() as taking a model
    ids = tokenizer.convert_tokens_to_ids([f"<|s_{code}|>" for code in range(SPEECH_CODES)])
    assert isinstance(ids, list)  # a list of tokens gives a list of ids
    missing = [
        code for code, token_id in enumerate(ids) if token_id is None or token_id == tokenizer.unk_token_id
    ]
    if missing:
        raise ModelSourceError(
            f"{model_ref}: tokenizer lacks {len(missing)} speech tokens, e.g. <|s_{missing[0]}|>"
        )
    stop_ids = _stop_ids(tokenizer, model)
    if not stop_ids:
        raise ModelSourceError(f"{model_ref}: tokenizer has neither <|im_end|> nor an EOS token")
    allowed = torch.tensor(ids + stop_ids, dtype=torch.long)
    vocab = model.get_output_embeddings().weight.shape[0]
    if int(allowed.max()) >= vocab:
        raise ModelSourceError(f"{model_ref}: tokenizer ids exceed the model's {vocab} output logits")
    return _LoadedLM.of(model, tokenizer, device, allowed)


def _stop_ids(tokenizer: Any, model: Any) -> list[int]:
    """``<|im_end|>`` and every EOS id of the tokenizer and generation config, without duplicates."""
    candidates: list[Any] = [tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.eos_token_id]
    eos = getattr(model.generation_config, "eos_token_id", None)
    candidates += eos if isinstance(eos, list) else [eos]
    stop: list[int] = []
    for token_id in candidates:
        if isinstance(token_id, int) and token_id != tokenizer.unk_token_id and token_id not in stop:
            stop.append(token_id)
    return stop


@dataclass
class _End:
    """The last item of a job's queue: why it ended, or the error to raise."""

    reason: FinishReason
    error: APIError | None = None


@dataclass
class _Job:
    """One generation handed to the thread, and the way back to the event loop."""

    params: GenerationParams
    loop: asyncio.AbstractEventLoop
    out: asyncio.Queue[list[int] | _End] = field(default_factory=asyncio.Queue)
    done: asyncio.Event = field(default_factory=asyncio.Event)  # set when the thread has left the job
    cancel: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)
    prompt_tokens: int | None = None  # set by the thread once the prompt is tokenized

    def post(self, item: list[int] | _End) -> None:
        """From the thread: hand an item to the consumer (a closed loop cancels the job)."""
        try:
            self.loop.call_soon_threadsafe(self.out.put_nowait, item)
        except RuntimeError:
            self.cancel.set()

    def leave(self) -> None:
        """From the thread: the job is over; wake anyone waiting in ``aclose``."""
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting
            self.loop.call_soon_threadsafe(self.done.set)


class TransformersTokenSource:
    """A ``TokenSource`` running a causal LM in-process with transformers.

    ``model`` is a local directory or a Hugging Face id (the official layout: ``config.json``,
    safetensors, tokenizer); ``device`` is "" (cuda if available, else cpu), "cpu", "cuda[:N]" or
    "npu[:N]"; ``dtype`` is "auto" (the checkpoint's), "float32", "float16" or "bfloat16";
    ``attention_fp32`` computes attention in float32 whatever ``dtype`` is.

    Logits are restricted to the speech tokens and the stop ids: after ``<|speech_start|>`` the model only
    speaks, so any other token is an error we prevent instead of filtering; it also keeps a random test
    model from wandering into text tokens.
    """

    def __init__(
        self,
        model: str,
        device: str,
        dtype: str = "auto",
        name: str = "transformers",
        attention_fp32: bool = False,
    ) -> None:
        if dtype not in _DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}: use one of {', '.join(_DTYPES)}")
        self.name = name
        self._model_ref = model
        self._device_name = device
        self._dtype = _DTYPES[dtype]
        self._attention = FP32_SDPA if attention_fp32 else "sdpa"
        self._lm: _LoadedLM | None = None
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._submit_lock = threading.Lock()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None

    async def start(self) -> None:
        """Load the model in a worker thread, then start the generation thread (idempotent)."""
        if self._thread is not None:
            return
        device = resolve_device(self._device_name)
        self._lm = await asyncio.to_thread(_load, self._model_ref, device, self._dtype, self._attention)
        self._closing.clear()
        self._thread = threading.Thread(target=self._serve, name=f"{self.name}-generate", daemon=True)
        self._thread.start()

    async def close(self) -> None:
        """Stop the running generation, fail the queued ones with Unavailable, join the thread."""
        if self._thread is None:
            return
        with self._submit_lock:
            self._closing.set()
            self._jobs.put(None)
        await asyncio.to_thread(self._thread.join)
        self._thread = None
        self._lm = None

    @property
    def tokenizer(self) -> Any | None:
        """The model's tokenizer once started (prompt lengths for the interleave window fit), else None."""
        return self._lm.tokenizer if self._lm is not None else None

    async def ready(self) -> bool:
        """True once the model is loaded and the generation thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def generate(self, params: GenerationParams) -> TransformersTokenStream:
        """A stream for one generation; it joins the queue on its first iteration."""
        if self._thread is None:
            raise Unavailable(f"LM source {self.name!r} is not started")
        return TransformersTokenStream(self, params)

    def _submit(self, job: _Job) -> None:
        """Queue a job for the generation thread; Unavailable once the source is closing."""
        with self._submit_lock:
            if self._closing.is_set():
                raise Unavailable(f"LM source {self.name!r} is shutting down")
            self._jobs.put(job)

    def _serve(self) -> None:
        """The generation thread: run jobs one by one until the ``None`` sentinel."""
        lm = self._lm
        assert lm is not None
        set_current(lm.device)
        with torch.inference_mode():
            while (job := self._jobs.get()) is not None:
                job.started.set()
                try:
                    end = _End(self._generate(lm, job))
                except APIError as exc:
                    end = _End("error", exc)
                except Exception as exc:
                    end = _End("error", BackendError(f"transformers generation failed: {exc!r}"))
                job.post(end)
                job.leave()

    def _generate(self, lm: _LoadedLM, job: _Job) -> FinishReason:
        """The sampling loop of one job, posting each code as it is chosen."""
        params = job.params
        # Encoded like vLLM does (the tokenizer's own special-token rule), so both backends agree.
        prompt = lm.tokenizer(params.prompt, return_tensors="pt").input_ids.to(lm.device)
        job.prompt_tokens = prompt.shape[1]
        seen = torch.zeros(len(lm.allowed_ids), dtype=torch.bool, device=lm.device)
        in_prompt = lm.lm_to_allowed[prompt[0]]
        seen[in_prompt[in_prompt >= 0]] = True
        generator = None
        if params.seed is not None:
            generator = torch.Generator(device=lm.device).manual_seed(params.seed)
        inputs, past = prompt, None
        for _ in range(params.max_tokens):
            if self._closing.is_set():
                raise Unavailable(f"LM source {self.name!r} is shutting down")
            if job.cancel.is_set():
                return "cancelled"
            logits, past = lm.logits(input_ids=inputs, past_key_values=past)
            index = choose_next(logits[0], seen, params, generator)
            if index >= SPEECH_CODES:
                return "stop"
            seen[index] = True
            job.post([index])
            inputs = lm.allowed_ids[index].view(1, 1)
        return "length"


class TransformersTokenStream:
    """One generation on a ``TransformersTokenSource``; each ``__anext__`` returns every code chosen
    since the previous one (at least one)."""

    finish_reason: FinishReason | None

    def __init__(self, source: TransformersTokenSource, params: GenerationParams) -> None:
        self.finish_reason = None
        self._source = source
        self._params = params
        self._job: _Job | None = None
        self._end: _End | None = None
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
            self._span = start_span("lm.generate", {"lm.url": f"inprocess:{self._source.name}"})
            self._job = _Job(self._params, asyncio.get_running_loop())
            self._source._submit(self._job)
            weakref.finalize(self, self._job.cancel.set)  # a stream dropped unclosed stops its generation
        job = self._job
        codes: list[int] = []
        if self._end is None:
            try:
                item = await job.out.get()
            except asyncio.CancelledError:
                job.cancel.set()
                raise
            while True:
                if isinstance(item, _End):
                    self._end = item
                    break
                codes += item
                if job.out.empty():
                    break
                item = job.out.get_nowait()
        if codes:
            self._deltas += 1
            return codes
        assert self._end is not None
        self.finish_reason = self._end.reason
        self._end_span()
        if self._end.error is not None:
            raise self._end.error
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Stop the generation; returns once the thread has left it (within one step)."""
        if self.finish_reason is None:
            self.finish_reason = "cancelled"
        self._end_span()
        job = self._job
        if job is None or self._end is not None:
            return
        job.cancel.set()
        if job.started.is_set():
            await job.done.wait()

    def _end_span(self) -> None:
        """End ``lm.generate`` with its outcome (once)."""
        self._span.set({"lm.deltas": self._deltas, "lm.finish_reason": self.finish_reason})
        self._span.end()
        self._span = NOOP_SPAN
