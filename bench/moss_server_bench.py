"""MOSS-TTS-Realtime end to end over HTTP: time to first audio and audio seconds per wall second with
full-size random weights (LM and codec), one request alone and several at once, for the current defaults
and the previous ones side by side in one run.

    python -m bench.moss_server_bench [--device cpu] [--frames 24] [--concurrency 1,4]
        [--configs previous,current] [--first-repeats 3] [--tiny] [--out moss_server_cpu.json]

What runs is the server itself on a loopback port: ``create_app`` under uvicorn, ``POST
/v1/audio/speech`` with streamed pcm read by an HTTP client, and behind it the speech service
(normalization, planning, the family's plan) -> ``MossFamily`` -> the batched frame engine -> the MOSS
codec stream (its batcher thread) -> the post chain and the pcm encoder. The LM is built in memory as
``bench.moss_lm_bench`` builds it (seeded random weights at the released sizes, its byte tokenizer, each
prompt cut to ``--prefill-rows`` rows: see that module); the codec decoder is the fixtures' seeded random
one at the official sizes (no encoder: no voice prompt, ``default`` voice). Speed does not depend on the
weight values; random weights rarely sample the end of speech, so every request makes ``--frames``
frames. Each request is one generation: the input is ``TEXT``, or as many of its first words as
``--frames`` frames hold at the pace set here (LONG_INPUT_CHARS_PER_S=100), so the family does not cut
it into parts. The requests set ``stream_normalize`` false (the loudness stage would hold the first
audio until it has NORM_MIN_ESTIMATE_S of it, in both configurations alike).

Configurations (``--configs``), each on the same weights and the same server code:

- ``previous``: the former defaults, MOSS_LM_DTYPE=float32, MOSS_CODEC_DTYPE=float32,
  MOSS_FIRST_CHUNK_FRAMES=2 and MOSS_PREPACK=false;
- ``current``: the defaults, MOSS_LM_DTYPE=auto and MOSS_CODEC_DTYPE=auto (LM and decoder in bf16 on a
  CPU with bf16 matrix instructions: ``app.families.moss.lm.loader.choose_precision``,
  ``app.families.moss.family.codec_precision``), MOSS_FIRST_CHUNK_FRAMES=1 and MOSS_PREPACK=true (the LM's
  and the decoder's weights laid out once for the CPU: ``app.codec.prepack``).

Per request: ``first_audio`` = until the first pcm bytes reach the client (prefill, the first decode's
frames and their decode, the response's start), ``total``; audio-s per wall-s = the seconds of audio of
all the requests at once over the wall time from their start to the last byte. Before those runs,
``--first-repeats`` short requests (4 frames) one after another give the median first audio of a lone
request. Prints JSON on stdout
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
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import httpx
import numpy as np
import torch
import uvicorn

from app.codec.prepack import prepack_for_cpu
from app.config import Settings
from app.families.moss.codec.config import MossCodecConfig
from app.families.moss.codec.model import MossAudioCodec
from app.families.moss.family import FRAMES_PER_SECOND, MossFamily, codec_precision
from app.families.moss.fixtures.codec import TINY_MOSS_CONFIG, random_codec
from app.families.moss.lm.loader import DTYPES, LoadedMoss, choose_precision
from app.families.moss.lm.prompt import MossPrompter
from app.families.moss.lm.stage import MossLM
from app.families.moss.lm.types import FrameJob, FrameSampling, Turn
from app.interleave.service import Interleave
from app.main import create_app
from app.observability.metrics import Metrics
from app.synthesis.engine import Engine, build_lexicons, build_normalizer
from app.synthesis.registry import VoiceRegistry
from app.synthesis.voice_stores.factory import build_voice_store
from app.text.duration import speech_seconds
from bench.moss_lm_bench import TEXT, build, machine, moss_parser
from bench.saving import save_report

SAMPLE_RATE = 24_000
PACE = 100.0
"""Characters a second the family sizes parts at here (the setting's fastest): see ``one_generation``."""


@dataclass(frozen=True)
class Config:
    """One side of the comparison: the LM and codec dtype settings, the first decode's frames and whether
    the weights are prepacked for the CPU (in place: the in-memory weights are shared, so a configuration
    that prepacks runs after those that do not)."""

    name: str
    lm_dtype: str
    codec_dtype: str
    first_chunk: int
    prepack: bool


CONFIGS = {
    "previous": Config("previous", "float32", "float32", 2, False),
    "current": Config("current", "auto", "auto", 1, True),
}


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


async def one(client: httpx.AsyncClient, frames: int, seed: int, started: float) -> dict[str, float]:
    """One streamed pcm request; its times from ``started`` (seconds)."""
    request = {
        "model": "moss-tts-realtime",
        "input": one_generation(TEXT, frames),
        "max_tokens": frames,
        "seed": seed,
        "stream_normalize": False,
        "response_format": "pcm",
    }
    first_audio = 0.0
    size = 0
    async with client.stream("POST", "/v1/audio/speech", json=request) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {(await response.aread()).decode()}")
        async for data in response.aiter_raw():
            if data and not first_audio:
                first_audio = time.perf_counter() - started
            size += len(data)
    total = time.perf_counter() - started
    seconds = size / 2 / SAMPLE_RATE
    return {"first_audio_s": first_audio, "total_s": total, "audio_s": seconds}


@asynccontextmanager
async def serving(settings: Settings, engine: Engine) -> AsyncIterator[str]:
    """The app on ``engine`` under uvicorn on a free loopback port; its base URL."""
    app = create_app(settings, engine=engine)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("the server exited during startup")
        await asyncio.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def engine_for(
    config: Config, args: argparse.Namespace, loaded: LoadedMoss, codec: MossAudioCodec, voices: str
) -> tuple[Settings, Engine]:
    """The server's settings and engine for ``config``: the family on the in-memory LM and codec."""
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        MODEL_FAMILIES=["moss"],
        MOSS_DEVICE=args.device,
        MOSS_LM_DTYPE=config.lm_dtype,
        MOSS_CODEC_DTYPE=config.codec_dtype,
        MOSS_REFERENCE_VOICES=False,
        MOSS_MAX_BATCH=max(args.counts),
        MOSS_FIRST_CHUNK_FRAMES=config.first_chunk,
        MOSS_PREPACK=config.prepack,
        INTERLEAVE_STORE="off",
        VOICES_DIR=voices,
        LONG_INPUT_CHARS_PER_S=PACE,
        VIABILITY_CHECK=False,  # a CPU is far from real time for MOSS: admission would serve one at a time
    )
    metrics = Metrics()
    interleave = Interleave.from_settings(settings, metrics)
    prompter = CutPrompter(MossPrompter(loaded.tokenizer, loaded.ids), args.prefill_rows)

    def lm_loader(s: Settings, device: str) -> MossLM:
        from app.families.moss.lm.engine import MossFrameEngine

        prepacked = s.MOSS_PREPACK and loaded.device.type == "cpu"  # as load_lm does
        if prepacked:
            prepack_for_cpu(loaded.model, "MOSS LM")
        engine = MossFrameEngine(loaded, max_batch=s.MOSS_MAX_BATCH, max_cached_rows=s.MOSS_CACHE_POSITIONS)
        window = min(loaded.max_positions, s.MOSS_CACHE_POSITIONS)
        return MossLM(prompter, engine, window, loaded.precision, prepacked)

    def codec_loader(s: Settings, device: torch.device) -> MossAudioCodec:
        decoder, _ = codec_precision(s, device.type)  # the decoder only: no encoder here
        codec.to(device).decoder.to(getattr(torch, decoder.dtype))
        return codec

    family = MossFamily(settings, interleave, metrics, lm_loader=lm_loader, codec_loader=codec_loader)
    registry = VoiceRegistry.of(build_voice_store(settings), 0)
    engine = Engine(
        settings,
        [family],
        build_normalizer(settings),
        registry,
        interleave,
        build_lexicons(settings),
        metrics,
    )
    return settings, engine


async def run_config(
    config: Config, args: argparse.Namespace, loaded: LoadedMoss, codec: MossAudioCodec
) -> dict[str, Any]:
    """``config``'s runs: a warm-up request, then each concurrency of ``args.counts``."""
    with tempfile.TemporaryDirectory() as voices:
        settings, engine = engine_for(config, args, loaded, codec, voices)
        runs: list[dict[str, Any]] = []
        async with serving(settings, engine) as url, httpx.AsyncClient(base_url=url, timeout=3600) as client:
            ready = (await client.get("/ready")).json()
            await one(client, 4, seed=0, started=time.perf_counter())  # warm-up
            lone_firsts: list[float] = []
            for i in range(args.first_repeats):  # short requests, one after another
                lone = await one(client, 4, seed=50 + i, started=time.perf_counter())
                lone_firsts.append(lone["first_audio_s"])
            for n in args.counts:
                started = time.perf_counter()
                results = await asyncio.gather(
                    *(one(client, args.frames, 100 + i, started) for i in range(n))
                )
                wall = time.perf_counter() - started
                audio = sum(r["audio_s"] for r in results)
                runs.append(
                    {
                        "streams": n,
                        "wall_s": wall,
                        "audio_s": audio,
                        "audio_s_per_wall_s": audio / wall,
                        "first_audio_s_median": statistics.median(r["first_audio_s"] for r in results),
                        "first_audio_s_max": max(r["first_audio_s"] for r in results),
                        "requests": results,
                    }
                )
    alone = runs[0]["audio_s_per_wall_s"] if runs and runs[0]["streams"] == 1 else None
    for r in runs:
        r["vs_one_request"] = r["audio_s_per_wall_s"] / alone if alone else None
    return {
        "config": config.name,
        "MOSS_LM_DTYPE": config.lm_dtype,
        "MOSS_CODEC_DTYPE": config.codec_dtype,
        "MOSS_FIRST_CHUNK_FRAMES": config.first_chunk,
        "lm": ready.get("lm", {}).get("precision"),
        "codec": ready.get("codec"),
        "first_audio_alone_s": lone_firsts,
        "first_audio_alone_s_median": statistics.median(lone_firsts) if lone_firsts else None,
        "runs": runs,
    }


def with_dtype(loaded: LoadedMoss, setting: str) -> LoadedMoss:
    """``loaded`` with its weights cast (in place) to what ``setting`` resolves to on its device."""
    precision = choose_precision(setting, loaded.device)
    dtype = DTYPES[precision.dtype]
    loaded.model.to(dtype)
    return replace(loaded, dtype=dtype, precision=precision)


def main(argv: list[str] | None = None) -> None:
    parser = moss_parser(__doc__, frames=24, concurrency="1,4")
    parser.add_argument("--configs", default="previous,current", help="of: " + ", ".join(CONFIGS))
    parser.add_argument(
        "--first-repeats", type=int, default=3, help="short lone requests timed for the first audio (median)"
    )
    args = parser.parse_args(argv)
    args.model_dir = ""
    args.dtype = "float32"  # built in float32, cast for each configuration
    args.counts = [int(c) for c in args.concurrency.split(",")]
    loaded = build(args)
    started = time.perf_counter()
    codec = random_codec(
        TINY_MOSS_CONFIG if args.tiny else MossCodecConfig.official(), seed=0, with_encoder=False
    )
    print(f"built the codec decoder in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    results = []
    for config in sorted((CONFIGS[name] for name in args.configs.split(",")), key=lambda c: c.prepack):
        loaded = with_dtype(loaded, config.lm_dtype)
        results.append(asyncio.run(run_config(config, args, loaded, codec)))
    report: dict[str, Any] = machine(loaded) | {
        "size": "tiny" if args.tiny else "full (random)",
        "frames_per_request": args.frames,
        "prompt_rows": args.prefill_rows,
        "configs": results,
    }
    print(json.dumps(report, indent=2))
    print(f"\n{report['cpu']}, {report['cores']} cores, {report['size']}", file=sys.stderr)
    for c in results:
        lm, decoder = c["lm"] or {}, (c["codec"] or {}).get("decoder", {})
        first = c["MOSS_FIRST_CHUNK_FRAMES"]
        print(
            f"{c['config']}: LM {lm.get('dtype')}, decoder {decoder.get('dtype')}, first decode {first}",
            file=sys.stderr,
        )
        if c["first_audio_alone_s"]:
            print(
                f"  first audio alone, median of {len(c['first_audio_alone_s'])}: "
                f"{c['first_audio_alone_s_median']:.2f} s",
                file=sys.stderr,
            )
        for r in c["runs"]:
            ratio = f" (x{r['vs_one_request']:.2f} of one)" if r["vs_one_request"] else ""
            print(
                f"  {r['streams']} requests x {args.frames} frames: first audio median "
                f"{r['first_audio_s_median']:.2f} s (max {r['first_audio_s_max']:.2f}), "
                f"{r['audio_s_per_wall_s']:.3f} audio-s/s{ratio}",
                file=sys.stderr,
            )
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
