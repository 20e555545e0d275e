"""Long inputs through the NeuCodec family: parts that fit, seeds per part, and a 4000-character input
spoken whole through the fake vLLM and through the in-process LM, every part's audio in order.

The codec is a stand-in whose audio is known from the codes (each code held for its 480 samples), so a
part's audio is exactly its codes, and the request's audio is the parts spliced with one crossfade each.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from app.audio.splice import splice, width_samples
from app.config import Settings
from app.core.constants import SAMPLES_PER_TOKEN
from app.core.family import ReferenceVoice, Sampling, SpeechJob
from app.core.stats import UtteranceStats
from app.families.neucodec.family import NeuCodecFamily
from app.families.neucodec.pipeline import synthesize
from app.families.neucodec.prompt import estimate_tokens, tts_prompt, vc_prompt
from app.families.shared.long_input import Budget, Cut, cut_into_parts, part_seed
from app.interleave.service import Interleave
from app.observability.metrics import Metrics
from tests.conftest import make_settings
from tests.fakes.fake_vllm import FakeVLLM, Script, prompt_token_count, random_codes

SENTENCES = (
    "The quarterly report is ready, and the numbers look better than we expected.",
    "Selamat pagi, mesyuarat kita akan bermula pada pukul sembilan tepat.",
    "Please bring your laptop, the printed slides, and any questions you have.",
    "After lunch we will walk through the budget line by line; it may take a while.",
    "Terima kasih kerana hadir, dan jangan lupa mengisi borang maklum balas!",
    "Is everyone able to hear me clearly at the back of the room?",
)


def long_text(chars: int) -> str:
    """Whole sentences, cycled, up to ``chars`` characters."""
    text, k = "", 0
    while len(text) + len(SENTENCES[k % len(SENTENCES)]) + 1 <= chars:
        text = f"{text} {SENTENCES[k % len(SENTENCES)]}".strip()
        k += 1
    return text


def known_audio(codes: list[int]) -> np.ndarray:
    """The stand-in codec's audio of ``codes``: each code's value held for its 480 samples."""
    return np.repeat(np.asarray(codes, dtype=np.float32) / 65536, SAMPLES_PER_TOKEN)


class KnownCodec:
    """The codec worker's ``decode`` with known audio (windows with context decode consistently)."""

    running = True

    async def decode(self, codes: list[int], deadline: float | None = None) -> np.ndarray:
        return known_audio(codes)

    async def close(self) -> None:
        self.running = False


async def family_on(settings: Settings) -> NeuCodecFamily:
    family = NeuCodecFamily(settings, Interleave(settings, None), Metrics())
    family.codec = KnownCodec()
    family.running.add("LM source", family.source.close)
    await family.source.start()
    return family


def job(text: str, seed: int | None = 7, max_tokens: int = 3072) -> SpeechJob:
    return SpeechJob("TTS-model", text, "husein", Sampling(max_tokens, 0.6, 1.15, seed=seed), 0.4, 0.2)


async def speak(family: NeuCodecFamily, request: SpeechJob) -> tuple[np.ndarray, UtteranceStats, int]:
    utterance = await family.plan(request)
    stats = UtteranceStats()
    chunks = [chunk async for chunk in utterance.stream(stats)]
    return np.concatenate(chunks), stats, len(utterance.parts)


def spoken_text(prompt: str) -> str:
    return prompt.removeprefix("<|im_start|>husein: ").removesuffix("<|speech_start|>")


def test_part_seeds_are_derived_from_the_request_seed() -> None:
    assert part_seed(None, 3) is None and part_seed(42, 0) == 42
    seeds = [part_seed(42, k) for k in range(1, 50)]
    assert len(set(seeds)) == 49 and all(0 <= s < 2**63 for s in seeds)
    assert seeds == [part_seed(42, k) for k in range(1, 50)] and part_seed(43, 1) != part_seed(42, 1)


def test_parts_fit_max_tokens_and_the_window_at_the_slow_pace() -> None:
    text = long_text(4000)

    def cut(window: int, max_tokens: int, whole: str = text) -> list[Cut[tuple[str, int]]]:
        budget = Budget(max_tokens, 50, 50, chars_per_s=10.0, wide_chars_per_s=2.5)

        def counted(chunk: str) -> tuple[str, int]:
            prompt = tts_prompt("husein", chunk)
            return prompt, estimate_tokens(prompt)

        return cut_into_parts(whole, counted, lambda prompt: window - prompt[1], budget)

    budget = Budget(600, 50, 50, chars_per_s=10.0, wide_chars_per_s=2.5)
    parts = cut(4096, 600)
    assert " ".join(part.text for part in parts) == text
    assert all(budget.speech_units(part.text) <= 600 for part in parts)  # 12 s: 120 characters
    assert all(part.text[-1] in ".!?" for part in parts[:-1])  # whole sentences at this size
    assert [p.prompt for p in parts] == [
        (tts_prompt("husein", p.text), estimate_tokens(tts_prompt("husein", p.text))) for p in parts
    ]
    for part in cut(200, 3072):
        assert part.prompt[1] + budget.speech_units(part.text) <= 200
    assert [part.text for part in cut(4096, 600, "Short.")] == ["Short."]


@pytest.fixture
async def fake_vllm() -> AsyncIterator[FakeVLLM]:
    """Random codes, 12 per word of the prompt's text (the same for the same prompt)."""
    fake = FakeVLLM(Script(tokens_per_event=16))
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


async def test_a_4000_character_input_is_spoken_whole_through_the_fake_vllm(fake_vllm: FakeVLLM) -> None:
    settings = make_settings(LM_BACKEND="http", TTS_API=fake_vllm.url, DEVICE="cpu")
    family = await family_on(settings)
    text = long_text(4000)
    assert len(text) > 3950
    try:
        audio, stats, count = await speak(family, job(text, seed=7))
    finally:
        await family.close()
    requests = [r.body for r in fake_vllm.requests]
    assert count == len(requests) > 1
    # the parts, in order, are the text; each fits one generation, with its own seed
    assert " ".join(spoken_text(body["prompt"]) for body in requests) == text
    assert [body["seed"] for body in requests] == [part_seed(7, k) for k in range(count)]
    for body in requests:
        assert body["max_tokens"] == 3072 and len(spoken_text(body["prompt"])) * 5 <= 3072
    # the audio is every part's, in order, each join one crossfade: no gap, nothing lost
    codes = [random_codes(body["prompt"], body["max_tokens"]) for body in requests]
    parts = [known_audio(c) for c in codes]
    width = width_samples(settings.LONG_INPUT_CROSSFADE_MS)
    assert len(audio) == sum(len(p) for p in parts) - (count - 1) * width == stats.samples
    np.testing.assert_allclose(audio, splice(parts, width), atol=1e-6)
    assert stats.codes == sum(len(c) for c in codes) and stats.tokens == [x for c in codes for x in c]
    assert stats.prompt_tokens == sum(prompt_token_count(body["prompt"]) for body in requests)  # as reported
    assert stats.finish_reason == "stop"


class RecordingCodec(KnownCodec):
    """``KnownCodec`` that records each decode's length and play-out deadline."""

    def __init__(self) -> None:
        self.decodes: list[tuple[int, float | None]] = []

    async def decode(self, codes: list[int], deadline: float | None = None) -> np.ndarray:
        self.decodes.append((len(codes), deadline))
        return known_audio(codes)


async def test_later_parts_start_with_windows_sized_by_the_listeners_lead(fake_vllm: FakeVLLM) -> None:
    """Only the first part's first window is due now; a later part starts while the listener still plays
    the parts before it, so its first window is sized by that lead and due when the listener gets there:
    fewer decodes than the parts spoken each from a small first window, the same audio."""
    settings = make_settings(LM_BACKEND="http", TTS_API=fake_vllm.url, DEVICE="cpu")
    family = await family_on(settings)
    codec = family.codec = RecordingCodec()
    try:
        audio, stats, count = await speak(family, job(long_text(4000), seed=7))
    finally:
        await family.close()
    assert count > 1
    assert [deadline for _, deadline in codec.decodes].count(None) == 1
    assert codec.decodes[0][0] == 20 + 10  # the first part: 0.4 s of its own, 0.2 s of future context
    schedule = family.schedule(0.4, 0.2)
    codes = [random_codes(r.body["prompt"], r.body["max_tokens"]) for r in fake_vllm.requests]
    alone = sum(len(schedule.windows(len(c))) for c in codes)
    assert len(codec.decodes) < alone
    width = width_samples(settings.LONG_INPUT_CROSSFADE_MS)
    np.testing.assert_allclose(audio, splice([known_audio(c) for c in codes], width), atol=1e-6)
    assert stats.samples == len(audio)


async def test_a_long_input_through_the_in_process_lm_equals_its_parts_generated_alone(
    tiny_lm_dir: Path,
) -> None:
    """The batched engine generates the next part while this one plays; each part's codes equal the
    same part generated alone with its seed."""
    settings = make_settings(LM_BACKEND="transformers", TTS_MODEL=str(tiny_lm_dir), DEVICE="cpu")
    family = await family_on(settings)
    text = "One small test. Another one follows, and a third! Then the end."
    try:
        request = job(text, seed=11, max_tokens=100)  # 2 s per generation: several parts
        utterance = await family.plan(request)
        stats = UtteranceStats()
        audio = np.concatenate([chunk async for chunk in utterance.stream(stats)])
        alone = []
        for part in utterance.parts:
            part_stats = UtteranceStats()
            chunks = synthesize(
                family.source, KnownCodec().decode, part.params, utterance.schedule, part_stats
            )
            alone.append(np.concatenate([chunk async for chunk in chunks]))
    finally:
        await family.close()
    assert len(utterance.parts) >= 3
    assert " ".join(part.text for part in utterance.parts) == text
    assert [part.params.seed for part in utterance.parts] == [part_seed(11, k) for k in range(len(alone))]
    np.testing.assert_allclose(
        audio, splice(alone, width_samples(settings.LONG_INPUT_CROSSFADE_MS)), atol=1e-6
    )
    assert stats.codes * SAMPLES_PER_TOKEN == sum(len(a) for a in alone)


async def test_a_long_input_in_a_reference_voice_prompts_every_part_with_the_reference(
    fake_vllm: FakeVLLM,
) -> None:
    settings = make_settings(LM_BACKEND="http", TTS_API=fake_vllm.url, DEVICE="cpu")
    family = await family_on(settings)
    reference = ReferenceVoice("A reference transcript.", tuple(range(100)))
    text = long_text(600)
    try:
        request = dataclasses.replace(job(text, max_tokens=500), voice=reference)
        audio, stats, count = await speak(family, request)
    finally:
        await family.close()
    prompts = [r.body["prompt"] for r in fake_vllm.requests]
    assert count == len(prompts) > 1
    head = vc_prompt(reference.text, reference.codes, "")
    assert all(prompt.startswith(head.removesuffix("<|speech_start|>")) for prompt in prompts)
    assert " ".join(p.rsplit("<|im_start|>", 1)[1].removesuffix("<|speech_start|>") for p in prompts) == text
    assert stats.codes * SAMPLES_PER_TOKEN - (count - 1) * width_samples(20.0) == len(audio)
