"""Streaming text-to-speech server for voice agents: LLM-style TTS model families behind an OpenAI-compatible
API."""
