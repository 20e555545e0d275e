"""Synthesis: the engine (families, normalizer, voices, turns), request planning and the speech service."""
