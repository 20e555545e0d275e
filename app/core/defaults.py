"""Defaults shared by a setting and the stage that reads it, so each has one home.

``Settings`` uses these as its field defaults; the stages use them as their constructor defaults (for
callers without settings: tests, benchmarks).
"""

from __future__ import annotations

TARGET_LOUDNESS_LUFS = -16.0
"""Loudness target: K-weighted, gated (BS.1770-style) level."""
MAX_GAIN_DB = 12.0
"""Largest boost or cut of the loudness stage."""
NORM_LOCK_S = 1.0
"""Seconds of voiced audio after which the loudness gain locks."""
NORM_MIN_ESTIMATE_S = 0.1
"""Audio the first loudness estimate needs (from the speech onset): less than the first decode window's
0.15 s of audio, so the first audio is never held back for it; the gain then settles at its slew rate."""
FADE_IN_MS = 10.0
"""Raised-cosine fade-in at the start of each response."""
MAX_PROMPT_CHARS = 2000
"""Longest accepted ``prompt`` (extra instructions of the llm normalizer)."""
MAX_INTERLEAVE_ID_CHARS = 256
"""Longest accepted interleave id, in characters."""
CODEC_CPU_BATCH_CODES = 1024
"""On a CPU (CODEC_BATCHING=auto), windows of any lengths are packed into one decode batch while it
holds at most this many codes: a round of the streams' windows is one decode that pays the fixed cost
once, as the windows' load model (``app.audio.round_cost``) counts it; only the longest windows run
alone or in pairs, so a batch holds the codec for about as long as one long window."""
BATCH_WINDOW_MS = 2.0
"""How long the codec batcher gathers more windows after the first."""
MAX_BATCH_SIZE = 16
"""Most decode windows in one codec batch."""
BATCH_TIMEOUT_S = 60.0
"""Longest wait of one decode or encode for the device."""
MAX_ENCODE_BATCH = 8
"""Most reference clips encoded in one batch."""
CUDA_GRAPH_BUCKETS = (1, 2, 4, 8, 16)
"""Batch sizes with a CUDA graph."""
CUDA_GRAPH_MAX = 96
"""Most CUDA graphs kept, startup and lazy captures together."""
# The stitcher's schedule (app/audio/stitcher.py); docs/benchmarks.md ("Stitch schedule") has the measurements
# behind these values (bench/stitch_bench.py).
DEFAULT_PLAYBACK_SPEED = 0.2
"""First decode window of a stream, in seconds of audio (a request's ``playback_speed``): 10 codes, so
playback starts once 0.2 s of audio (plus the future context) has been generated."""
DEFAULT_PLAYBACK_OVERLAP_SPEED = 0.2
"""Future context decoded with each window, in seconds (a request's ``playback_overlap_speed``)."""
STREAM_CHUNK_GROWTH = 6.0
"""Factor by which each decode window is longer than the one before."""
STREAM_MAX_CHUNK_S = 15.0
"""Longest decode window (own codes), in seconds."""
STREAM_PAST_CONTEXT_S = 0.2
"""Past context decoded with each window and sliced off, in seconds."""
CROSSFADE_MS = 100.0
"""Raised-cosine crossfade at window joins."""
STREAM_REDECODE_BUDGET = 0.2
"""Share of an utterance's codes that may be decoded twice: the last window takes more past context
while the whole utterance stays within ``1 + budget`` codes decoded per code emitted."""
STREAM_CUT_MARGIN_S = 0.08
"""A window is cut at the codes that exist once its listener has less audio left than this (or than
1.5 times the stream's last decode)."""
STREAM_FIRST_COVER = 1.2
"""Windows fit the codec's load with this much to spare (``app.audio.round_cost``): the first window plays,
and each window grows no further than, this many times the decode time of a round of every stream's next
window, so that no listener runs dry while the next window decodes."""
VIABILITY_MAX_FIRST_S = 0.5
"""A new stream is admitted while the first window that keeps every stream fed is at most this long."""
CODEC_BUCKETS = (20, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
"""Decode window lengths in codes (context included); 20 is the first window's 10 codes + 10 future."""
