"""Speech-token sources: prompt building, vLLM over HTTP, in-process transformers."""
