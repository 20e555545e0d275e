"""The NeuCodec family: a Qwen3 LM emitting NeuCodec speech tokens, decoded by windows (stitcher)."""
