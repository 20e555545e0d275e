"""Model families: one package each, built from the stages (text, lm, codec, audio, interleave)."""
