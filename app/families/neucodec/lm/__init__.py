"""NeuCodec's speech-token LM: the token-source contract, vLLM over HTTP, and in-process (loading, the
speech-only output layer, sampling, the batched engine)."""
