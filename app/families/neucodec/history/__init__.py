"""NeuCodec's multi-turn history: fitting an id's turns in front of a prompt, counting prompt tokens, the
fallback and the commits (on the shared ``app.interleave`` store)."""
