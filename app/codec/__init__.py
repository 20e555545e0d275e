"""Codec stage, generic: the deadline-aware batcher, CUDA graphs and the decoder runner, precision choice,
reference-code caches (this process's and the one shared through the voice store)."""
