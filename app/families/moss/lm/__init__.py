"""MOSS-TTS-Realtime's LM stage: model, loader, prompt rows, sampling and the batched frame engine."""
