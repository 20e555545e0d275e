"""Audio rates shared by the codec and the output stages (NeuCodec: 24 kHz mono, 50 codes per second)."""

SAMPLE_RATE = 24_000
TOKENS_PER_SECOND = 50
SAMPLES_PER_TOKEN = SAMPLE_RATE // TOKENS_PER_SECOND  # 480
CODE_VALUES = 65_536
"""Speech codes of every family fit below this (NeuCodec's 0..65535; MOSS's 0..1023 per codebook)."""
