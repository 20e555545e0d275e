"""Streaming text-to-speech server: speech-token LM + NeuCodec decoder behind an OpenAI-compatible API."""
