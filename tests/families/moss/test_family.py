"""MossFamily behind the seam, on the tiny MOSS codec with the stand-in LM stage."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import AsyncGenerator
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from app.core.errors import BackendError, InvalidRequest, Unavailable
from app.core.family import ReferenceVoice, Sampling, SpeechJob
from app.core.stats import UtteranceStats
from app.families.moss.family import MIN_ROOM_FRAMES, MossFamily, codec_precision, model_ids
from app.families.moss.lm.types import FrameJob
from app.families.moss.voices import DEFAULT_VOICE
from tests.fakes.fake_moss import FRAMES_PER_ID, SYSTEM_ROWS
from tests.families.moss.conftest import Parts, build, moss_settings

FRAME = 1920
TEXT = "one two three four five"  # 5 ids: 10 frames with the stand-in engine


def job(
    family: MossFamily, text: str = TEXT, voice: str | ReferenceVoice = DEFAULT_VOICE, **fields: object
) -> SpeechJob:
    sampling = fields.pop("sampling", family.defaults)
    assert isinstance(sampling, Sampling)
    values: dict[str, object] = {
        "model": "moss-tts-realtime",
        "text": text,
        "voice": voice,
        "sampling": sampling,  # first_chunk_s unset: the family's own first decode
    }
    return SpeechJob(**(values | fields))  # type: ignore[arg-type]


async def speak_all(family: MossFamily, speech: SpeechJob) -> tuple[np.ndarray, UtteranceStats]:
    stats = UtteranceStats()
    utterance = await family.plan(speech)
    chunks = [chunk async for chunk in utterance.stream(stats)]
    return np.concatenate(chunks), stats


def test_ids_capabilities_and_defaults(tiny_moss_codec_dir: Path) -> None:
    family = build(moss_settings(tiny_moss_codec_dir)).family
    assert family.model_ids() == ("moss-tts-realtime", "OpenMOSS-Team/MOSS-TTS-Realtime")
    assert model_ids(moss_settings(tiny_moss_codec_dir, MOSS_TTS_MODEL="/models/moss")) == (
        "moss-tts-realtime",
    )
    assert family.capabilities.reference_voice and family.capabilities.multi_turn
    assert (family.reference.rate, family.reference.codebooks, family.reference.needs_transcript) == (
        24000,
        16,
        False,
    )
    d = family.defaults
    assert (d.temperature, d.top_p, d.top_k, d.repetition_penalty, d.max_tokens) == (0.8, 0.6, 30, 1.1, 1500)
    assert family.voices.voices == (DEFAULT_VOICE,) and family.voices.resolve("alloy") == DEFAULT_VOICE


async def test_frames_stream_through_the_codec(moss: Parts) -> None:
    audio, stats = await speak_all(moss.family, job(moss.family))
    frames = moss.engine.frames_for(moss.engine.jobs[-1])
    assert len(frames) == 5 * FRAMES_PER_ID
    codec = moss.family.codec
    assert codec is not None
    with torch.inference_mode():
        whole = codec.codec.decode(torch.from_numpy(frames)).numpy()
    np.testing.assert_allclose(audio, whole, atol=1e-4, rtol=1e-4)  # the engine's frames, in order
    assert (stats.codes, stats.samples, stats.finish_reason) == (10, 10 * FRAME, "stop")
    assert stats.prompt_tokens == SYSTEM_ROWS + 5 and stats.decodes == 4  # 1 + 2 + 4 + the last 3
    assert codec.live_streams == 0 and moss.engine.open_rows == 0


async def test_closing_the_stream_closes_the_engine_row_and_the_codec_stream(moss: Parts) -> None:
    moss.engine.delay_s = 0.01
    stats = UtteranceStats()
    chunks = (await moss.family.plan(job(moss.family, " ".join(["word"] * 40)))).stream(stats)
    first = await anext(chunks)
    assert first.size == FRAME  # the first decode is MOSS_FIRST_CHUNK_FRAMES (1) frames
    assert moss.engine.open_rows == 1
    await chunks.aclose()
    assert (
        moss.engine.open_rows == 0 and moss.family.codec is not None and moss.family.codec.live_streams == 0
    )
    assert stats.finish_reason == "cancelled" and stats.codes < 80


async def test_the_codec_stream_opens_with_the_first_frames(moss: Parts) -> None:
    moss.engine.delay_s = 0.3  # the row waits before its first frame (as behind a full batch)
    chunks = (await moss.family.plan(job(moss.family))).stream(UtteranceStats())
    first = asyncio.ensure_future(anext(chunks))
    await asyncio.sleep(0.1)
    assert moss.engine.open_rows == 1 and moss.family.codec is not None
    assert moss.family.codec.live_streams == 0  # no decoder state held while waiting
    await first
    assert moss.family.codec.live_streams == 1
    await chunks.aclose()
    assert moss.family.codec.live_streams == 0


async def test_an_engine_that_refuses_leaves_no_codec_stream(moss: Parts) -> None:
    moss.engine.full = True
    with pytest.raises(Unavailable):
        await speak_all(moss.family, job(moss.family))
    assert moss.family.codec is not None and moss.family.codec.live_streams == 0


async def test_an_engine_failure_mid_stream_is_an_error(moss: Parts) -> None:
    failing = moss.engine.stream

    async def fails_after_a_frame(
        frame_job: FrameJob, admitted: bool = False
    ) -> AsyncGenerator[np.ndarray, None]:
        async with contextlib.aclosing(
            failing(frame_job, admitted=admitted)
        ) as inner:  # the row ends failing
            async for frames in inner:
                yield frames
                raise BackendError("the row failed")

    moss.engine.stream = fails_after_a_frame  # type: ignore[method-assign]
    stats = UtteranceStats()
    chunks = (await moss.family.plan(job(moss.family))).stream(stats)
    with pytest.raises(BackendError):
        async for _ in chunks:
            pass
    assert stats.finish_reason == "error" and moss.engine.open_rows == 0
    assert moss.family.codec is not None and moss.family.codec.live_streams == 0


async def test_sampling_comes_from_the_request(moss: Parts) -> None:
    sampling = Sampling(
        max_tokens=7, temperature=0.0, repetition_penalty=1.0, top_p=0.9, top_k=2**31 - 1, seed=42
    )
    moss.engine.frames = 10  # "one" fits 7 frames (0.3 s at the slow pace); the engine would make 10
    _, stats = await speak_all(moss.family, job(moss.family, "one", sampling=sampling))
    frame_job = moss.engine.jobs[-1]
    s = frame_job.sampling
    assert (s.temperature, s.repetition_penalty, s.top_p, s.top_k, s.seed) == (0.0, 1.0, 0.9, 1027, 42)
    assert s.repetition_window == 50 and frame_job.max_frames == 7
    assert (stats.codes, stats.finish_reason) == (7, "length")
    plain = await moss.family.plan(job(moss.family))
    assert plain.job.sampling.seed is None and plain.job.max_frames == 1500


async def test_max_tokens_is_cut_to_the_window_a_text_without_room_is_cut_and_a_voice_without_is_400(
    tiny_moss_codec_dir: Path,
) -> None:
    # a fast pace (100 characters a second): the window, not max_tokens, decides where texts are cut
    parts = build(moss_settings(tiny_moss_codec_dir, LONG_INPUT_CHARS_PER_S=100.0), max_positions=40)
    await parts.family.start()
    try:
        planned = await parts.family.plan(job(parts.family))
        assert len(planned.parts) == 1 and planned.job.max_frames == 40 - (SYSTEM_ROWS + 5)
        # the stand-in feeds every text id again after the prefill: 14 words leave 16 frames for 14 ids
        fits = " ".join(["word"] * 14)
        one = await parts.family.plan(job(parts.family, fits))
        assert len(one.parts) == 1 and one.job.max_frames == 16 >= MIN_ROOM_FRAMES
        # 15 words leave 15 frames for 15 ids; 20 words leave 10 frames, below MIN_ROOM_FRAMES: both cut
        for words, cut in ((15, [14, 1]), (20, [14, 6])):
            planned = await parts.family.plan(job(parts.family, " ".join(["word"] * words)))
            assert [len(part.text.split()) for part in planned.parts] == cut
            assert [part.job.max_frames for part in planned.parts] == [40 - SYSTEM_ROWS - n for n in cut]
        reference = ReferenceVoice("", tuple(range(16)) * 20, 16)  # 20 reference rows: 9 frames left
        with pytest.raises(InvalidRequest) as too_long:
            await parts.family.plan(job(parts.family, voice=reference))
        assert too_long.value.param == "reference_audio" and too_long.value.code == "context_length_exceeded"
    finally:
        await parts.family.close()


async def test_reference_codes_become_the_voice_prompt(moss: Parts) -> None:
    codes = np.arange(5 * 16, dtype=np.int64) % 1024
    await speak_all(moss.family, job(moss.family, voice=ReferenceVoice("", tuple(codes.tolist()), 16)))
    reference = moss.prompter.calls[-1].reference
    assert reference is not None
    np.testing.assert_array_equal(reference, codes.reshape(5, 16))
    for bad in (
        ReferenceVoice("", (1, 2, 3), 1),
        ReferenceVoice("", (1,) * 17, 16),
        ReferenceVoice("", (1024,) * 16, 16),
    ):
        with pytest.raises(InvalidRequest):
            await moss.family.plan(job(moss.family, voice=bad))


def wav_bytes(seconds: float, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    audio = 0.2 * np.sin(
        np.arange(int(seconds * 16000)) / 16000 * 2 * np.pi * 180
    ) + 0.01 * rng.standard_normal(int(seconds * 16000))
    out = io.BytesIO()
    sf.write(out, audio.astype(np.float32), 16000, format="WAV")
    return out.getvalue()


async def test_encode_reference_gives_flat_frames_and_caches(moss: Parts) -> None:
    samples = np.random.default_rng(0).standard_normal(24000 * 2).astype(np.float32) * 0.1
    codes = await moss.family.encode_reference(samples, "ab" * 32)
    assert len(codes) == 25 * 16 and all(0 <= c < 1024 for c in codes)
    assert await moss.family.encode_reference(samples, "ab" * 32) == codes
    assert len(moss.family.references) == 1


async def test_voice_prompts_can_be_disabled(tiny_moss_codec_dir: Path) -> None:
    parts = build(moss_settings(tiny_moss_codec_dir, MOSS_REFERENCE_VOICES=False))
    await parts.family.start()
    try:
        with pytest.raises(InvalidRequest) as refused:
            parts.family.check_can_encode()
        assert refused.value.code == "vc_disabled"
        assert parts.family.codec is not None and not parts.family.codec.can_encode
    finally:
        await parts.family.close()


async def test_built_in_voices_are_clips_encoded_at_startup(
    tiny_moss_codec_dir: Path, tmp_path: Path
) -> None:
    (tmp_path / "anna.wav").write_bytes(wav_bytes(1.5))
    (tmp_path / "bad name.wav").write_bytes(wav_bytes(1.5))  # not a voice name: skipped
    (tmp_path / "notes.txt").write_text("not a clip")
    settings = moss_settings(tiny_moss_codec_dir, MOSS_VOICES_DIR=str(tmp_path), MOSS_DEFAULT_VOICE="anna")
    parts = build(settings)
    assert parts.family.voices.voices == (DEFAULT_VOICE, "anna")
    assert parts.family.voices.resolve(None) == "anna" and parts.family.voices.resolve("nova") == "anna"
    await parts.family.start()
    try:
        clip = parts.family.voice_codes["anna"]
        assert clip.shape == (18, 16)  # 1.5 s at 12.5 frames per second, the partial frame dropped
        await speak_all(parts.family, job(parts.family, voice="anna"))
        np.testing.assert_array_equal(parts.prompter.calls[-1].reference, clip)
        await speak_all(parts.family, job(parts.family, voice=DEFAULT_VOICE))
        assert parts.prompter.calls[-1].reference is None
    finally:
        await parts.family.close()
    with pytest.raises(ValueError, match="MOSS_DEFAULT_VOICE"):
        build(moss_settings(tiny_moss_codec_dir, MOSS_DEFAULT_VOICE="nobody"))


async def test_the_family_is_unavailable_before_start(tiny_moss_codec_dir: Path) -> None:
    parts = build(moss_settings(tiny_moss_codec_dir))
    with pytest.raises(Unavailable):
        await parts.family.plan(job(parts.family))
    assert await parts.family.ready() == {"codec": False, "lm": False}
    await parts.family.close()  # safe without a start


def test_the_codec_dtypes_and_why(tiny_moss_codec_dir: Path) -> None:
    auto = moss_settings(tiny_moss_codec_dir, MOSS_CODEC_DTYPE="auto")
    decoder, encoder = codec_precision(auto, "cpu", flags=["avx512_bf16"], env={})
    assert (decoder.dtype, encoder.dtype) == ("bfloat16", "float32")  # the encoder keeps prompts exact
    decoder, _ = codec_precision(auto, "cpu", flags=["avx512_bf16"], env={"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert decoder.dtype == "float32" and "ONEDNN_MAX_CPU_ISA" in decoder.reason
    assert codec_precision(auto, "cpu", flags=["avx2"], env={})[0].dtype == "float32"
    assert codec_precision(auto, "cuda", flags=["avx512_bf16"], env={})[0].dtype == "float32"
    assert codec_precision(auto, "npu", flags=[], env={})[0].dtype == "bfloat16"
    bf16 = moss_settings(tiny_moss_codec_dir, MOSS_CODEC_DTYPE="bfloat16")
    emulated, encoder = codec_precision(bf16, "cpu", flags=["avx2"], env={})
    assert emulated.dtype == encoder.dtype == "bfloat16" and emulated.slow and "WARNING" in emulated.reason
    assert not codec_precision(bf16, "cpu", flags=["avx512_bf16"], env={})[0].slow
    assert not codec_precision(bf16, "cuda", flags=["avx2"], env={})[0].slow


async def test_auto_loads_a_bf16_decoder_beside_a_float32_encoder(
    tiny_moss_codec_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.codec import precision as codec_rule
    from app.families.moss.family import load_codec

    monkeypatch.setattr(codec_rule, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    codec = load_codec(moss_settings(tiny_moss_codec_dir, MOSS_CODEC_DTYPE="auto"), torch.device("cpu"))
    assert codec.encoder is not None and codec.decoder_dtype == torch.bfloat16
    assert {p.dtype for p in codec.encoder.parameters()} == {torch.float32}
    assert {p.dtype for p in codec.quantizer.parameters()} == {torch.float32}
