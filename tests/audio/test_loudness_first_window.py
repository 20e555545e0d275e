"""The loudness stage does not hold the first audio longer than the first decode window: its first gain
comes from the first 0.1 s after the onset, then settles without a step to what a longer first estimate
reaches."""

from __future__ import annotations

import numpy as np

from app.audio.loudness import LoudnessNormalizer
from app.audio.post import PostChain, PostOptions
from tests.audio.test_loudness import SR, noise, speechlike

FIRST = 3600  # the stitcher's first chunk with the default schedule: 10 codes - 50 ms = 0.15 s


def test_the_chain_sends_the_first_chunk_at_once() -> None:
    audio = speechlike(3.0, seed=1, level=0.05)
    chain = PostChain(PostOptions("pcm", stream=True))
    held = PostChain(PostOptions("pcm", stream=True, min_estimate_s=0.5))  # the earlier default
    first = chain.push(audio[:FIRST])
    assert len(first) >= (FIRST - round(0.1 * SR)) * 2  # all of it but the last partial 10 ms frame
    assert held.push(audio[:FIRST]) == b""  # waits for 0.5 s after the onset
    rest = [audio[i : i + 4800] for i in range(FIRST, len(audio), 4800)]
    total = len(first) + sum(len(chain.push(piece)) for piece in rest) + len(chain.flush())
    assert total == len(audio) * 2


def test_the_gain_settles_without_a_step_to_the_longer_estimate() -> None:
    audio = np.concatenate([noise(0.3, -22, seed=3), noise(3.7, -28, seed=4)])  # louder at first
    early, held = LoudnessNormalizer(min_estimate_s=0.1), LoudnessNormalizer(min_estimate_s=0.5)
    out = [early.push(audio[:FIRST])]
    assert out[0].size >= round(0.1 * SR)
    first_gain = early.gain_db
    for i in range(FIRST, len(audio), 2400):
        out.append(early.push(audio[i : i + 2400]))
    out.append(early.flush())
    y = np.concatenate(out)
    assert y.size == audio.size
    gain_db = 20 * np.log10(np.abs(y.astype(np.float64)) / np.abs(audio.astype(np.float64)))
    step = np.abs(np.diff(gain_db[:: SR // 100]))  # one value per 10 ms frame
    assert step.max() <= 4.0 * 0.010 + 1e-6  # never faster than the 4 dB/s slew: no audible jump
    held_out = np.concatenate([held.push(audio[i : i + 2400]) for i in range(0, len(audio), 2400)])
    assert held_out.size + held.flush().size == audio.size
    assert first_gain is not None and early.gain_db is not None and held.gain_db is not None
    assert early.gain_db - first_gain > 2  # refined from the first estimate
    assert abs(early.gain_db - held.gain_db) < 1e-6  # to the same locked gain in the end
