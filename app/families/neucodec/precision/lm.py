"""The NeuCodec TTS LM (a Qwen3 causal LM, run in-process with transformers) as a precision part.

Inputs: a fixed TTS prompt (``<|im_start|>husein: TEXT<|speech_start|>``) followed by a fixed
continuation of seeded random speech tokens, fed teacher-forced in one forward pass. Outputs, in
order: each decoder layer's output hidden states ``layer.NN`` ``[T, hidden]``, the final norm
``norm`` ``[T, hidden]`` and ``logits`` ``[continuation, ids]``: at every position that predicts a
continuation token, the logits over the ids the server samples from (the 65,536 speech tokens and
the stop ids, as ``app.families.neucodec.lm.transformers_source`` restricts them).

Sources: a checkpoint directory or Hugging Face id in the official layout, or ``random:qwen3-1.7b``:
random weights (seed 0, transformers' init, made in float32 and cast) in Qwen3-1.7B's shape, with no
tokenizer: the prompt and continuation are then seeded random ids and the logits span the vocabulary.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch

from app.core.device import resolve_device, set_current
from app.families.neucodec.prompt import tts_prompt
from app.families.neucodec.speech_tokens import SPEECH_CODES
from app.families.shared.precision_part import RANDOM_PREFIX, Kind, capture, release
from app.families.shared.run_config import RunConfig
from app.lm.attention import attention_implementation

PROMPT_VOICE = "husein"
PROMPT_TEXT = "The quick brown fox jumps over the lazy dog, then naps beside the river until noon."
RANDOM_PROMPT_TOKENS = 24
# Qwen3-1.7B's config.json (Qwen/Qwen3-1.7B): 28 layers of 2048, GQA 16/8 heads of 128, tied embeddings.
QWEN3_1_7B: dict[str, Any] = {
    "vocab_size": 151936,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 40960,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}
RANDOM_MODELS = {"qwen3-1.7b": QWEN3_1_7B}


def _random_config(source: str) -> Any:
    from transformers import Qwen3Config

    name = source.removeprefix(RANDOM_PREFIX)
    if name not in RANDOM_MODELS:
        raise ValueError(
            f"unknown random LM {source!r}: use {', '.join(RANDOM_PREFIX + n for n in RANDOM_MODELS)}"
        )
    return Qwen3Config(**RANDOM_MODELS[name])


def _load(source: str, config: RunConfig, device: torch.device) -> Any:
    """The model of ``source`` in ``config``'s dtype and attention, on ``device``, eval mode."""
    from transformers import AutoModelForCausalLM

    attention = attention_implementation(config.attention)
    if source.startswith(RANDOM_PREFIX):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # same weights in every process: made in float32, then cast
            model = AutoModelForCausalLM.from_config(
                _random_config(source), dtype=torch.float32, attn_implementation=attention
            )
        model = model.to(config.torch_dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=config.torch_dtype, attn_implementation=attention
        )
    return model.to(device).eval()


def _speech_inputs(source: str, seed: int, length: int) -> tuple[torch.Tensor, int, torch.Tensor]:
    """Prompt + continuation ids, the prompt's length and the sampled ids, from the checkpoint's tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source)
    prompt = tokenizer(tts_prompt(PROMPT_VOICE, PROMPT_TEXT), return_tensors="pt").input_ids[0]
    speech = tokenizer.convert_tokens_to_ids([f"<|s_{code}|>" for code in range(SPEECH_CODES)])
    assert isinstance(speech, list)  # a list of tokens gives a list of ids
    if tokenizer.unk_token_id in speech or None in speech:
        raise ValueError(f"{source}: the tokenizer lacks the <|s_N|> speech tokens of a NeuCodec TTS LM")
    stop = [
        t for t in (tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.eos_token_id) if t is not None
    ]
    allowed = torch.tensor(list(dict.fromkeys(speech + stop)), dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, SPEECH_CODES, (length,), generator=generator)
    continuation = allowed[codes]
    return torch.cat([prompt, continuation]), len(prompt), allowed


class NeuCodecLMPart:
    """``neucodec-lm``: see the module docstring."""

    name: ClassVar[str] = "neucodec-lm"
    kind: ClassVar[Kind] = "lm"
    description: ClassVar[str] = (
        "NeuCodec TTS LM (Qwen3, in-process): per-layer hidden states, logits; random:qwen3-1.7b"
    )
    default_length: ClassVar[int] = 160

    def make_inputs(
        self, source: str, seed: int, length: int
    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        if source.startswith(RANDOM_PREFIX):
            vocab = _random_config(source).vocab_size
            generator = torch.Generator().manual_seed(seed)
            ids = torch.randint(0, vocab, (RANDOM_PROMPT_TOKENS + length,), generator=generator)
            inputs = {"input_ids": ids}
            prompt_length = RANDOM_PROMPT_TOKENS
        else:
            ids, prompt_length, allowed = _speech_inputs(source, seed, length)
            inputs = {"input_ids": ids, "allowed_ids": allowed}
        return inputs, {"prompt_length": prompt_length, "seed": seed}

    def run(
        self, source: str, config: RunConfig, inputs: dict[str, torch.Tensor], options: dict[str, Any]
    ) -> dict[str, torch.Tensor]:
        device = resolve_device(config.device)
        set_current(device)
        model = _load(source, config, device)
        layers = model.model.layers
        modules: dict[str, torch.nn.Module] = {f"layer.{i:02d}": layer for i, layer in enumerate(layers)}
        modules["norm"] = model.model.norm
        ids = inputs["input_ids"].to(device)
        start = int(options["prompt_length"]) - 1  # the logits at position p predict token p + 1
        with torch.inference_mode(), capture(modules) as captured:
            logits = model(input_ids=ids[None], use_cache=False).logits[0, start:-1]  # [continuation, vocab]
        if "allowed_ids" in inputs:
            logits = logits.index_select(-1, inputs["allowed_ids"].to(device))
        outputs = {name: captured[name] for name in modules} | {"logits": logits.to("cpu", torch.float32)}
        del model, logits
        release(device)
        return outputs
