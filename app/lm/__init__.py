"""LM stage, generic: the left-padded batch cache and grouped prefill, attention choices, the byte-level
tokenizer of the tiny test checkpoints."""
