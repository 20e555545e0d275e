"""Loading the NeuCodec TTS LM in-process: tokenizer, model and the ids it may speak.

A Qwen3 causal LM in the official layout (``config.json``, safetensors, tokenizer), from a local directory
or a Hugging Face id (``app.hub``). Logits are restricted to the speech tokens and the stop ids: after
``<|speech_start|>`` the model only speaks, so any other token is an error we prevent instead of
filtering; it also keeps a random test model from wandering into text tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from app import hub
from app.families.neucodec.lm.speech_head import SpeechHead, layout_for_cpu
from app.families.neucodec.speech_tokens import SPEECH_CODES
from app.lm.attention import attention_implementation
from app.lm.padded_cache import new_cache
from app.observability.progress import transformers_tqdm_hook
from app.observability.startup_errors import ModelSourceError

# the files of the official layout fetched from the Hub, and those a directory must hold
LM_FILES = ("*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "*.tiktoken")
LM_REQUIRED = (("config.json",), ("*.safetensors",), ("tokenizer.json", "tokenizer.model", "vocab.json"))
DTYPES: dict[str, torch.dtype | str] = {
    "auto": "auto",
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


@dataclass(frozen=True)
class LoadedLM:
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
    def of(cls, model: Any, tokenizer: Any, device: torch.device, allowed_ids: torch.Tensor) -> LoadedLM:
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


def load_lm(
    model_ref: str, device: torch.device, dtype: torch.dtype | str, attention: str = "sdpa"
) -> LoadedLM:
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
    stop_ids = stop_ids_of(tokenizer, model)
    if not stop_ids:
        raise ModelSourceError(f"{model_ref}: tokenizer has neither <|im_end|> nor an EOS token")
    allowed = torch.tensor(ids + stop_ids, dtype=torch.long)
    vocab = model.get_output_embeddings().weight.shape[0]
    if int(allowed.max()) >= vocab:
        raise ModelSourceError(f"{model_ref}: tokenizer ids exceed the model's {vocab} output logits")
    return LoadedLM.of(model, tokenizer, device, allowed)


def stop_ids_of(tokenizer: Any, model: Any) -> list[int]:
    """``<|im_end|>`` and every EOS id of the tokenizer and generation config, without duplicates."""
    candidates: list[Any] = [tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.eos_token_id]
    eos = getattr(model.generation_config, "eos_token_id", None)
    candidates += eos if isinstance(eos, list) else [eos]
    stop: list[int] = []
    for token_id in candidates:
        if isinstance(token_id, int) and token_id != tokenizer.unk_token_id and token_id not in stop:
            stop.append(token_id)
    return stop
