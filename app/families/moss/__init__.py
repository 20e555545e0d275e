"""The MOSS-TTS-Realtime family: the batched frame engine (``app.lm.moss``) and the MOSS codec stream."""
