"""A byte-level BPE tokenizer without merges, written in the Hugging Face layout for tiny test and demo
checkpoints of any family: every byte is a token, so any text encodes."""

from __future__ import annotations

import json
from pathlib import Path

MAX_POSITIONS = 4096


def write_byte_tokenizer(
    out_dir: Path,
    special: tuple[str, ...],
    added: list[str],
    *,
    eos: str,
    pad: str,
    max_length: int = MAX_POSITIONS,
) -> int:
    """A byte-level BPE tokenizer without merges (ids 0..255 are the bytes, so any text encodes), then the
    ``special`` tokens (special) and the ``added`` ones (not special), into ``out_dir``; the vocab size."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in added])
    tokenizer.save(str(out_dir / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": eos,
        "pad_token": pad,
        "model_max_length": max_length,
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return tokenizer.get_vocab_size()
