"""Counting prompt tokens with the model's own tokenizer, where one can be had without a download."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from app.families.neucodec.history.fit import TokenCounter

log = logging.getLogger(__name__)

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def load_local_tokenizer(model: str) -> Any | None:
    """The tokenizer of ``model`` when it is a local directory holding one, else None (never downloads).

    Blocking (a large vocabulary takes seconds): call it in a worker thread. A tokenizer that fails to
    load is logged and None is returned: the caller counts with the estimate instead.
    """
    directory = Path(model)
    if not any((directory / name).is_file() for name in TOKENIZER_FILES):
        return None
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    except Exception as exc:
        log.warning("could not load the tokenizer of %s (%r); prompt lengths are estimated", model, exc)
        return None


def tokenizer_counter(tokenizer: Any) -> TokenCounter:
    """A counter that encodes like the LM backends do (the tokenizer's own special-token rule)."""

    def count(prompt: str) -> int:
        return len(tokenizer(prompt).input_ids)

    return count
