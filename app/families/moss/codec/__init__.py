"""MOSS-Audio-Tokenizer: our causal streaming codec for the MOSS-TTS-Realtime family (official layout)."""
