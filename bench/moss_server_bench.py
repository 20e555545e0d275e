"""MOSS-TTS-Realtime end to end through the speech service: time to first audio and real-time factor
with full-size random weights (LM and codec), one request alone and several at once.

    python -m bench.moss_server_bench [--device cpu] [--frames 24]
        [--concurrency 1,4] [--first-chunk 2] [--tiny] [--out moss_server_cpu.json]

What runs is the server's own path without a socket: ``SpeechService.speech`` (normalization, planning,
the family's plan) -> ``MossFamily`` -> the batched frame engine -> the MOSS codec stream (its batcher
thread) -> the post chain and the pcm encoder. The LM is built in memory as ``bench.moss_lm_bench`` builds
it (seeded random weights at the released sizes, its byte tokenizer, each prompt cut to ``--prefill-rows``
rows: see that module); the codec decoder is the fixtures' seeded random one at the official sizes (no
encoder: no voice prompt, ``default`` voice). Speed does not depend on the weight values; random weights
rarely sample the end of speech, so every request makes ``--frames`` frames. Each request is one
generation: the input is ``TEXT``, or as many of its first words as ``--frames`` frames hold at the pace
set here (LONG_INPUT_CHARS_PER_S=100), so the family does not cut it into parts.

Per request: ``first_pcm`` = until the service returns (the first decoded chunk exists: prefill, the
first ``--first-chunk`` frames and their decode), ``first_byte`` = until the first encoded bytes (the
loudness stage may hold the first audio until it has NORM_MIN_ESTIMATE_S of it; ``stream_normalize``
off here, so it does not), ``total``; RTF = total time / seconds of audio (real time needs <= 1). With
N requests at once, their frames share the engine's steps and the codec's batches. Prints JSON on stdout
and a table on stderr; ``--out`` writes the JSON to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from app.api.schemas import SpeechRequest
from app.audio.decoder_pool import ReferenceDecoder
from app.config import Settings
from app.core.stats import UtteranceStats
from app.families.moss.codec.config import MossCodecConfig
from app.families.moss.family import FRAMES_PER_SECOND, MossFamily
from app.families.moss.fixtures.codec import TINY_MOSS_CONFIG, random_codec
from app.families.moss.lm.loader import LoadedMoss
from app.families.moss.lm.prompt import MossPrompter
from app.families.moss.lm.stage import MossLM
from app.families.moss.lm.types import FrameJob, FrameSampling, Turn
from app.interleave.service import Interleave
from app.observability.metrics import Metrics
from app.synthesis.engine import Engine, build_lexicons, build_normalizer
from app.synthesis.registry import VoiceRegistry
from app.synthesis.service import SpeechService
from app.synthesis.voice_stores.factory import build_voice_store
from app.text.duration import speech_seconds
from bench.moss_lm_bench import TEXT, build, machine, moss_parser
from bench.saving import save_report

FRAME_S = 0.08
PACE = 100.0
"""Characters a second the family sizes parts at here (the setting's fastest): see ``one_generation``."""


class CutPrompter:
    """The real prompter, each prefill cut from the front to ``rows`` (the byte tokenizer's prompts are
    about 4x what the real tokenizer makes; see ``bench.moss_lm_bench``)."""

    def __init__(self, prompter: MossPrompter, rows: int) -> None:
        self.prompter = prompter
        self.rows = rows

    def text_ids(self, text: str) -> tuple[int, ...]:
        return self.prompter.text_ids(text)

    def job(
        self,
        text: str,
        *,
        reference: np.ndarray | None,
        history: Sequence[Turn] = (),
        sampling: FrameSampling = FrameSampling(),  # noqa: B008 (frozen)
        max_frames: int,
    ) -> FrameJob:
        full = self.prompter.job(
            text, reference=reference, history=history, sampling=sampling, max_frames=max_frames
        )
        if self.rows and len(full.prefill) > self.rows:
            return replace(full, prefill=full.prefill[-self.rows :])
        return full


def one_generation(text: str, frames: int) -> str:
    """The first words of ``text`` that one generation of ``frames`` frames holds at ``PACE``."""
    words = text.split()
    while len(words) > 1 and speech_seconds(" ".join(words), PACE) * FRAMES_PER_SECOND > frames:
        words.pop()
    return " ".join(words)


async def one(
    service: SpeechService, args: argparse.Namespace, seed: int, started: float
) -> dict[str, float]:
    """One request through the service; its times from ``started`` (seconds)."""
    stats = UtteranceStats()
    request = SpeechRequest(
        model="moss-tts-realtime",
        input=one_generation(TEXT, args.frames),
        max_tokens=args.frames,
        seed=seed,
        stream_normalize=False,
        response_format="pcm",
    )
    synthesis = await service.speech(request, stats)
    first_pcm = time.perf_counter() - started
    first_byte = 0.0
    size = 0
    async for data in synthesis.encoded():
        if data and not first_byte:
            first_byte = time.perf_counter() - started
        size += len(data)
    total = time.perf_counter() - started
    seconds = size / 2 / 24000
    return {
        "first_pcm_s": first_pcm,
        "first_byte_s": first_byte,
        "total_s": total,
        "frames": stats.codes,
        "audio_s": seconds,
        "rtf": total / seconds if seconds else float("inf"),
        "prompt_rows": float(stats.prompt_tokens or 0),
    }


async def run(args: argparse.Namespace, loaded: LoadedMoss, counts: list[int]) -> list[dict[str, Any]]:
    codec_config = TINY_MOSS_CONFIG if args.tiny else MossCodecConfig.official()
    started = time.perf_counter()
    codec = random_codec(codec_config, seed=0, with_encoder=False)
    print(f"built the codec decoder in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    with tempfile.TemporaryDirectory() as voices:
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            MODEL_FAMILIES=["moss"],
            MOSS_DEVICE=args.device,
            MOSS_REFERENCE_VOICES=False,
            MOSS_MAX_BATCH=max(counts),
            MOSS_FIRST_CHUNK_FRAMES=args.first_chunk,
            MOSS_MAX_CHUNK_FRAMES=max(args.first_chunk, 8),
            INTERLEAVE_STORE="off",
            VOICES_DIR=voices,
            LONG_INPUT_CHARS_PER_S=PACE,
        )
        metrics = Metrics()
        interleave = Interleave.from_settings(settings, metrics)
        prompter = CutPrompter(MossPrompter(loaded.tokenizer, loaded.ids), args.prefill_rows)

        def lm_loader(s: Settings, device: str) -> MossLM:
            from app.families.moss.lm.engine import MossFrameEngine

            engine = MossFrameEngine(
                loaded, max_batch=s.MOSS_MAX_BATCH, max_cached_rows=s.MOSS_CACHE_POSITIONS
            )
            return MossLM(prompter, engine, min(loaded.max_positions, s.MOSS_CACHE_POSITIONS))

        family = MossFamily(
            settings,
            interleave,
            metrics,
            lm_loader=lm_loader,
            codec_loader=lambda s, device: codec.to(device),
        )
        registry = VoiceRegistry.of(build_voice_store(settings), 0)
        lexicons = build_lexicons(settings)
        engine = Engine(
            settings, [family], build_normalizer(settings), registry, interleave, lexicons, metrics
        )
        decoder = ReferenceDecoder(threads=1, timeout_s=10, min_s=1, max_s=30)
        service = SpeechService(engine, decoder)
        await engine.start()
        runs: list[dict[str, Any]] = []
        try:
            await one(service, replace_frames(args, 4), seed=0, started=time.perf_counter())  # warm-up
            for n in counts:
                started = time.perf_counter()
                results = await asyncio.gather(*(one(service, args, 100 + i, started) for i in range(n)))
                wall = time.perf_counter() - started
                frames = sum(r["frames"] for r in results)
                runs.append(
                    {
                        "streams": n,
                        "wall_s": wall,
                        "frames": frames,
                        "frames_per_s": frames / wall,
                        "first_pcm_s_median": statistics.median(r["first_pcm_s"] for r in results),
                        "first_pcm_s_max": max(r["first_pcm_s"] for r in results),
                        "first_byte_s_median": statistics.median(r["first_byte_s"] for r in results),
                        "rtf_median": statistics.median(r["rtf"] for r in results),
                        "prompt_rows": results[0]["prompt_rows"],
                        "requests": results,
                    }
                )
        finally:
            await engine.close()
            decoder.close()
    return runs


def replace_frames(args: argparse.Namespace, frames: int) -> argparse.Namespace:
    copy = argparse.Namespace(**vars(args))
    copy.frames = frames
    return copy


def main(argv: list[str] | None = None) -> None:
    parser = moss_parser(__doc__, frames=24, concurrency="1,4")
    parser.add_argument("--first-chunk", type=int, default=2, help="MOSS_FIRST_CHUNK_FRAMES")
    args = parser.parse_args(argv)
    args.model_dir = ""
    loaded = build(args)
    counts = [int(c) for c in args.concurrency.split(",")]
    runs = asyncio.run(run(args, loaded, counts))
    report: dict[str, Any] = machine(loaded) | {
        "lm_dtype": str(loaded.dtype).removeprefix("torch."),
        "codec_dtype": "float32",
        "size": "tiny" if args.tiny else "full (random)",
        "frames_per_request": args.frames,
        "first_chunk_frames": args.first_chunk,
        "runs": runs,
    }
    print(json.dumps(report, indent=2))
    print(
        f"\n{report['cpu']}, {report['cores']} cores, LM {report['lm_dtype']}, {report['size']}",
        file=sys.stderr,
    )
    for r in runs:
        print(
            f"{r['streams']} streams x {args.frames} frames: "
            f"first audio median {r['first_pcm_s_median']:.2f} s "
            f"(max {r['first_pcm_s_max']:.2f}), {r['frames_per_s']:.2f} frames/s together, "
            f"RTF median {r['rtf_median']:.1f} (prompt {r['prompt_rows']:.0f} rows)",
            file=sys.stderr,
        )
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
