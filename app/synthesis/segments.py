"""A planned input of several segments (SSML breaks, rate changes) played as one response.

``plan_utterance`` plans every segment with the family before any audio (so each one's errors are
known before the first byte): a plan that is one segment at the request's rate is the family's own
utterance, exactly as for plain text. Otherwise a ``SegmentedUtterance`` plays the segments in order
and puts a ``Boundary`` between them (the pause that follows, and the next segment's rate), which the
post chain turns into exact digital silence after the speed change (``app.audio.post``). A boundary
is yielded only just before the next audio, so the first thing a response carries is audio (a failure
before it is still an HTTP error), and a pause at the very end comes after the last audio.

Segment ``i`` is generated with the request's voice and sampling, its seed ``part_seed(seed, i)`` as
for the parts of a long input; each segment may itself be cut into parts by its family. Segments run
one after the other: the next starts when the one before has been played (a pause covers its start).
Stats are the sum of the segments' (as for parts).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Mapping
from typing import Protocol

from app.audio.post import Boundary, Chunk
from app.core.constants import SAMPLE_RATE
from app.core.family import Utterance
from app.core.stats import UtteranceStats
from app.synthesis.planning import SpeechPlan
from app.text.speech_plan import Pause, Speak


class Playable(Protocol):
    """What a response plays: a family's utterance, or segments of them with boundaries between."""

    def headers(self) -> Mapping[str, str]: ...

    def stream(self, stats: UtteranceStats) -> AsyncGenerator[Chunk, None]: ...


def _samples(ms: int) -> int:
    return round(ms * SAMPLE_RATE / 1000)


async def plan_utterance(plan: SpeechPlan) -> Playable:
    """The family's utterance for a one-segment plan, else every segment planned and played in order."""
    family, spoken = plan.family, plan.spoken
    speaks = [item for item in spoken.items if isinstance(item, Speak)]
    if len(spoken.items) == 1 and speaks[0].rate == 1.0:
        return await family.plan(plan.job)
    items: list[_Rated | Pause] = []
    index = 0
    for item in spoken.items:
        if isinstance(item, Pause):
            items.append(item)
            continue
        items.append(_Rated(await family.plan(plan.segment_job(item.text, index)), item.rate))
        index += 1
    return SegmentedUtterance(items)


class _Rated:
    """A segment's utterance and its rate (a multiple of the request's)."""

    def __init__(self, utterance: Utterance, rate: float) -> None:
        self.utterance = utterance
        self.rate = rate

    def headers(self) -> Mapping[str, str]:
        return self.utterance.headers()

    def stream(self, stats: UtteranceStats) -> AsyncGenerator[Chunk, None]:
        return self.utterance.stream(stats)


class SegmentedUtterance:
    """Segments and pauses played as one stream of PCM chunks and boundaries (see the module docstring)."""

    def __init__(self, items: list[_Rated | Pause]) -> None:
        self.items = items
        self.segments = [item for item in items if isinstance(item, _Rated)]

    def headers(self) -> Mapping[str, str]:
        return self.segments[0].headers()

    async def stream(self, stats: UtteranceStats) -> AsyncGenerator[Chunk, None]:
        started = time.perf_counter()
        silence, done = 0, list[UtteranceStats]()
        try:
            for item in self.items:
                if isinstance(item, Pause):
                    silence += _samples(item.ms)
                    continue
                boundary: Boundary | None = Boundary(silence, item.rate)
                if not done and silence == 0 and item.rate == 1.0:
                    boundary = None  # the first segment, at the request's rate: nothing to mark
                part = UtteranceStats()
                done.append(part)
                chunks = item.stream(part)
                try:
                    async for chunk in chunks:
                        if boundary is not None:
                            yield boundary
                            boundary = None
                        stats.samples += chunk.size if not isinstance(chunk, Boundary) else 0
                        yield chunk
                finally:
                    await chunks.aclose()
                if boundary is None:  # it was played (a segment that made no audio passes its pause on)
                    silence = 0
                _total(stats, done, started)
            if silence:
                yield Boundary(silence, 1.0)
        finally:
            _total(stats, done, started)


def _total(stats: UtteranceStats, parts: list[UtteranceStats], started: float) -> None:
    """The request's stats from its segments' (``samples`` counts what was yielded)."""
    stats.codes = sum(p.codes for p in parts)
    stats.tokens = [code for p in parts for code in p.tokens]
    stats.prompt_tokens = sum(p.prompt_tokens or 0 for p in parts)
    stats.decodes = sum(p.decodes for p in parts)
    stats.lm_wait_s = sum(p.lm_wait_s for p in parts)
    stats.decode_wait_s = sum(p.decode_wait_s for p in parts)
    reasons = [p.finish_reason for p in parts]
    if reasons:
        stats.finish_reason = "length" if "length" in reasons and reasons[-1] == "stop" else reasons[-1]
    stats.generation_s = time.perf_counter() - started
