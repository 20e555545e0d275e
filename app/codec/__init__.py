"""Codec stage: NeuCodec model code, device handling and the worker thread that owns the device."""
