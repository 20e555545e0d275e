"""The tiny LM checkpoint loads offline with the Auto classes and tokenizes like the real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

from app.families.neucodec.fixtures.lm import write_tiny_lm

PROMPT = "<|im_start|>jenny: Hello there!<|speech_start|>"


@pytest.fixture(scope="module")
def tokenizer(tiny_lm_dir: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(tiny_lm_dir)


def test_layout_and_config(tiny_lm_dir: Path) -> None:
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= {
        path.name for path in tiny_lm_dir.iterdir()
    }
    config = json.loads((tiny_lm_dir / "config.json").read_text())
    assert config["architectures"] == ["Qwen3ForCausalLM"]
    assert config["model_type"] == "qwen3"
    assert config["tie_word_embeddings"] is False  # the planted stop schedule sets output rows of its own
    assert config["vocab_size"] == 256 + 4 + 65536


def test_special_and_speech_tokens_encode_as_single_ids(
    tokenizer: PreTrainedTokenizerBase,
) -> None:
    ids = tokenizer.encode(PROMPT + "<|s_0|><|s_53404|><|s_65535|><|im_end|>")
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens[0] == "<|im_start|>"
    assert tokens[-5:] == ["<|speech_start|>", "<|s_0|>", "<|s_53404|>", "<|s_65535|>", "<|im_end|>"]
    assert tokenizer.decode(ids[1:-5]) == "jenny: Hello there!"  # text round-trips byte by byte


def test_speech_tokens_survive_skip_special_tokens(tokenizer: PreTrainedTokenizerBase) -> None:
    """vLLM detokenizes with skip_special_tokens=True: the speech tokens must stay in the text."""
    ids = tokenizer.encode("<|s_1|><|s_2|><|im_end|>")
    assert tokenizer.decode(ids, skip_special_tokens=True) == "<|s_1|><|s_2|>"


def test_ids_and_eos(tokenizer: PreTrainedTokenizerBase) -> None:
    speech = tokenizer.convert_tokens_to_ids([f"<|s_{code}|>" for code in (0, 1, 65535)])
    assert speech == [260, 261, 260 + 65535]
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert len(tokenizer) == 256 + 4 + 65536


def test_model_loads_and_runs(tiny_lm_dir: Path, tokenizer: PreTrainedTokenizerBase) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_dir).eval()
    assert model.config.eos_token_id == tokenizer.eos_token_id
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    with torch.inference_mode():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], len(tokenizer))
    assert torch.isfinite(logits).all()


def test_same_seed_same_weights(tiny_lm_dir: Path, tmp_path: Path) -> None:
    again = write_tiny_lm(tmp_path / "again", seed=0)
    assert (again / "model.safetensors").read_bytes() == (tiny_lm_dir / "model.safetensors").read_bytes()
    other = write_tiny_lm(tmp_path / "other", seed=1)
    assert (other / "model.safetensors").read_bytes() != (tiny_lm_dir / "model.safetensors").read_bytes()
