"""MOSS codec (MOSS-Audio-Tokenizer) on full-size random weights: streamed decode throughput, first-chunk
latency, voice-prompt encode speed, state memory, and the bf16 decoder's SNR against float32.

    python -m bench.moss_codec_bench [--codec-dir DIR] [--device cpu]
        [--streams 1,8] [--seconds 2] [--chunk 3] [--out moss_codec_cpu.json] [--tiny]

Decode: N streams each decode ``--seconds`` of random codes (16 codebooks) in chunks of ``--chunk``
frames, as fast as possible, through ``MossCodecService`` (the codec Batcher: a collector thread and the
device's worker thread). Two variants in the same run, stream count by stream count:

- ``one_at_a_time``: ``max_batch=1``: every chunk is its own forward (upstream decodes one stream at a time);
- ``batched``: the chunks of all streams waiting together run as one forward (each stream a row).

Throughput is audio seconds emitted per wall second (all streams together). ``lockstep``: the codec
alone, N streams stepping together in one call a step (every stream a row) against the same steps one
stream at a time: the batching ceiling, free of the batcher's scheduling. First-chunk latency: a fresh
stream's first chunk of 1 and of 3 frames, alone, median of ``--repeats``. Encode: one 10 s clip of noise
to 16 codebooks, median of ``--repeats``. State: bytes of one stream's decoder rings. Precision: the
decoder cast to bfloat16 (quantizer in float32) against float32 on the same codes, SNR in dB; the option
is offered only at >= 30 dB.

The codec is built in memory from the fixtures' seeded random weights (no 7 GB file) unless ``--codec-dir``
names a checkpoint. Prints JSON on stdout and a table on stderr; ``--out`` writes the JSON to
``bench/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from app.codec.batch_stats import BatchStats
from app.core.device import resolve_device
from app.families.moss.codec.config import MossCodecConfig
from app.families.moss.codec.loading import load_codec
from app.families.moss.codec.model import MossAudioCodec
from app.families.moss.codec.service import MossCodecOptions, MossCodecService
from app.families.moss.fixtures.codec import TINY_MOSS_CONFIG, random_codec
from bench.saving import save_report

NQ = 16
PARTS = "service,lockstep,latency,encode,bf16"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _codes(frames: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 1024, size=(frames, NQ))


async def _stream(service: MossCodecService, codes: np.ndarray, chunk: int) -> int:
    stream = service.open_stream()
    try:
        samples = 0
        for start in range(0, codes.shape[0], chunk):
            samples += (await stream.decode(codes[start : start + chunk])).shape[0]
        return samples
    finally:
        stream.close()


async def decode_throughput(
    codec: MossAudioCodec, device: torch.device, n_streams: int, batched: bool, args: argparse.Namespace
) -> dict[str, object]:
    """Audio seconds per wall second of ``n_streams`` decoding together."""
    frames = round(args.seconds * codec.config.frame_rate)
    options = MossCodecOptions(max_streams=max(n_streams, 1), max_batch=16 if batched else 1)
    service = MossCodecService(codec, device, options=options)
    service.start()
    try:
        await _stream(service, _codes(args.chunk, seed=99), args.chunk)  # warmup
        service.decode_batcher.stats = BatchStats()  # the measured run only
        started = time.perf_counter()
        samples = await asyncio.gather(
            *(_stream(service, _codes(frames, seed=i), args.chunk) for i in range(n_streams))
        )
        wall = time.perf_counter() - started
    finally:
        await service.close()
    audio_s = sum(samples) / codec.config.sampling_rate
    stats = service.decode_batcher.stats
    return {
        "variant": "batched" if batched else "one_at_a_time",
        "streams": n_streams,
        "chunk_frames": args.chunk,
        "audio_s": round(audio_s, 2),
        "wall_s": round(wall, 2),
        "audio_s_per_s": round(audio_s / wall, 3),
        "batch_sizes": dict(sorted(stats.sizes.items())),
        "median_step_s": round(stats.compute_s.percentile(50), 3),
    }


def lockstep_throughput(
    codec: MossAudioCodec, n_streams: int, args: argparse.Namespace
) -> list[dict[str, object]]:
    """The codec alone (no batcher): N streams stepping together, one call per step with every stream a
    row, against the same steps made one stream at a time; audio seconds per wall second of each."""
    frames = round(args.seconds * codec.config.frame_rate)
    codes = [torch.from_numpy(_codes(frames, seed=i)).to(codec.device) for i in range(n_streams)]
    rows = []
    for batched in (False, True):
        states = [codec.new_state() for _ in range(n_streams)]
        codec.decode_step([codes[0][: args.chunk]], [codec.new_state()])  # warmup
        started = time.perf_counter()
        for start in range(0, frames, args.chunk):
            chunks = [c[start : start + args.chunk] for c in codes]
            if batched:
                codec.decode_step(chunks, states)
            else:
                for chunk, state in zip(chunks, states, strict=True):
                    codec.decode_step([chunk], [state])
        wall = time.perf_counter() - started
        audio_s = n_streams * frames / codec.config.frame_rate
        rows.append(
            {
                "variant": "lockstep_batched" if batched else "lockstep_one_at_a_time",
                "streams": n_streams,
                "chunk_frames": args.chunk,
                "audio_s": round(audio_s, 2),
                "wall_s": round(wall, 2),
                "audio_s_per_s": round(audio_s / wall, 3),
            }
        )
        for state in states:
            state.release()
    return rows


def first_chunk_latency(codec: MossAudioCodec, frames: int, repeats: int) -> float:
    """Median seconds from a fresh stream's first chunk of ``frames`` frames to its audio."""
    times = []
    for r in range(repeats):
        state = codec.new_state()
        codes = torch.from_numpy(_codes(frames, seed=r)).to(codec.device)
        started = time.perf_counter()
        codec.decode_step([codes], [state])
        times.append(time.perf_counter() - started)
        state.release()
    return statistics.median(times)


def encode_speed(codec: MossAudioCodec, seconds: float, repeats: int) -> dict[str, float]:
    clip = torch.from_numpy(np.random.default_rng(0).standard_normal(int(seconds * 24000)).astype(np.float32))
    clip = (0.3 * clip).to(codec.device)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        codec.encode([clip], NQ)
        times.append(time.perf_counter() - started)
    median = statistics.median(times)
    return {"clip_s": seconds, "median_s": round(median, 3), "audio_s_per_s": round(seconds / median, 3)}


def bf16_snr(codec: MossAudioCodec, frames: int) -> dict[str, float]:
    """SNR (dB) of the bf16 decoder's one-shot audio against float32, and its decode time vs float32."""
    codes = torch.from_numpy(_codes(frames, seed=7)).to(codec.device)
    started = time.perf_counter()
    reference = codec.decode(codes)
    fp32_s = time.perf_counter() - started
    with torch.device("meta"):
        low = MossAudioCodec(codec.config, with_encoder=False)
        low.decoder.to(torch.bfloat16)
    low.to_empty(device=codec.device)  # bf16 transformers, fp32 quantizer: no fp32 copy of the decoder
    source = codec.state_dict()
    with torch.no_grad():
        for key, tensor in low.state_dict().items():
            tensor.copy_(source[key])
    started = time.perf_counter()
    audio = low.decode(codes)
    bf16_s = time.perf_counter() - started
    del low
    noise = (audio - reference).pow(2).mean()
    snr = 10 * torch.log10(reference.pow(2).mean() / noise).item()
    return {
        "frames": frames,
        "snr_db": round(snr, 2),
        "fp32_decode_s": round(fp32_s, 3),
        "bf16_decode_s": round(bf16_s, 3),
    }


def table(report: dict[str, object]) -> str:
    lines = [f"MOSS codec on {report['device']} ({report['cpu']}, {report['torch_threads']} torch threads)"]
    lines.append(f"{'variant':<24}{'streams':>8}{'audio s/s':>11}{'wall s':>9}{'step s':>9}  batch sizes")
    for row in report["decode"]:
        lines.append(
            f"{row['variant']:<24}{row['streams']:>8}{row['audio_s_per_s']:>11}{row['wall_s']:>9}"
            f"{row.get('median_step_s', '-'):>9}  {row.get('batch_sizes', '-')}"
        )
    for key in ("first_chunk_s", "encode", "state_mb_per_stream", "bf16"):
        if key in report:
            lines.append(f"{key}: {report[key]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--codec-dir", help="a checkpoint to load instead of the in-memory random one")
    parser.add_argument("--tiny", action="store_true", help="the tiny random codec (checks the bench itself)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--streams", default="1,8", help="comma-separated stream counts")
    parser.add_argument("--seconds", type=float, default=2.0, help="audio seconds each stream decodes")
    parser.add_argument("--chunk", type=int, default=3, help="frames per decode call")
    parser.add_argument("--encode-s", type=float, default=10.0, help="encoded clip length")
    parser.add_argument("--snr-frames", type=int, default=25, help="frames of the bf16 comparison")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parts", default=PARTS, help=f"comma-separated, of {PARTS}")
    parser.add_argument("--out", help="file name for the JSON under bench/results/")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    started = time.perf_counter()
    if args.codec_dir:
        codec = load_codec(args.codec_dir, device)
        kind = f"checkpoint {args.codec_dir}"
    else:
        config = TINY_MOSS_CONFIG if args.tiny else MossCodecConfig.official()
        codec = random_codec(config, seed=0, with_encoder="encode" in args.parts).to(device)
        kind = "tiny random" if args.tiny else "official-size random (seed 0)"
    built_s = time.perf_counter() - started
    state = codec.new_state()
    state_mb = state.nbytes / 1e6
    state.release()
    parts = set(args.parts.split(","))
    decode_rows: list[dict[str, object]] = []
    for n in [int(x) for x in args.streams.split(",")]:
        if "service" in parts:
            for batched in (False, True) if n > 1 else (False,):  # one stream: nothing to batch
                decode_rows.append(asyncio.run(decode_throughput(codec, device, n, batched, args)))
                print(json.dumps(decode_rows[-1]), file=sys.stderr)
        if "lockstep" in parts and n > 1:
            decode_rows.extend(lockstep_throughput(codec, n, args))
            print(json.dumps(decode_rows[-2:]), file=sys.stderr)
    report: dict[str, object] = {
        "bench": "moss_codec",
        "codec": kind,
        "device": str(device),
        "cpu": cpu_model(),
        "nproc": len(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "build_s": round(built_s, 1),
        "codebooks": NQ,
        "decode": decode_rows,
        "state_mb_per_stream": round(state_mb, 1),
    }
    if "latency" in parts:
        report["first_chunk_s"] = {
            f"{frames}_frame": round(first_chunk_latency(codec, frames, args.repeats), 3) for frames in (1, 3)
        }
    if "encode" in parts:
        report["encode"] = encode_speed(codec, args.encode_s, args.repeats)
    if "bf16" in parts:
        report["bf16"] = bf16_snr(codec, args.snr_frames)
    report["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report))
    print(table(report), file=sys.stderr)
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
