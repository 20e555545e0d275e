"""PCM stages after the families: stitching windows, splicing parts, loudness, speaking rate, fade-in,
encoders, and upload decoding."""
