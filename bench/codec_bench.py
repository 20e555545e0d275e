"""Codec throughput through CodecWorker: audio seconds decoded (or encoded) per wall second.

    python -m bench.codec_bench [--mode decode|encode] [--codec-dir DIR] [--device ""|cpu|cuda] [--out F.json]

Decode mode (the default):

Each stream behaves like one streaming request: it decodes windows of ``--windows`` codes in turn
(default 100, 200, 400 codes = 2, 4, 8 s of audio, past context included, as a stitcher's growing
windows would), ``--repeats`` times, awaiting each window before sending the next. All streams share
one ``CodecWorker``, which decodes one window at a time, so more streams mean longer queues, not more
throughput: this is the baseline a cross-request batcher has to beat. Codes are uniform random from a
fixed seed; one warmup decode per window size runs first and is not counted.

The decoder is an official-size random checkpoint (speed does not depend on the weight values),
written to a temp dir by our fixtures tool unless ``--codec-dir`` names a directory that already holds
one (an empty or missing ``--codec-dir`` is written and kept, to reuse next time). Throughput counts
all decoded audio, context included; latency is from enqueue to result, per window.

Encode mode (``--mode encode``, what voice conversion pays per reference clip): each stream encodes
clips of ``--clips`` seconds (default 5 and 10 s of 16 kHz noise) in turn, ``--repeats`` times. Streams
that run together send clips of the same length at the same moment, so the worker batches them
(queued encodes of equal padded length run as one forward pass); real uploads rarely share a padded
length (a 20 ms bucket), so the 1-stream row is the realistic per-clip cost. The checkpoint is an
official-size random one with the encoder (~3.3 GB: w2v-bert with all 24 layers as the official file
has them, of which 16 are built); ``--codec-dir`` reuses one. One warmup encode per clip length.

Prints JSON on stdout and a table on stderr; ``--out`` also writes the JSON to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from app.codec.device import resolve_device
from app.codec.neucodec.config import NeuCodecConfig
from app.codec.neucodec.encoder import frames_for
from app.codec.neucodec.encoder_config import SAMPLE_RATE
from app.codec.neucodec.loading import PICKLE_FILE, SAFETENSORS_FILE, load_decoder, load_encoder
from app.codec.worker import CodecWorker
from app.tools.fixtures.codec import TINY_CODEC_CONFIG, write_codec_checkpoint

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or the platform's answer elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def prepare_checkpoint(
    codec_dir: Path | None, tmp: Path, tiny: bool, seed: int, with_encoder: bool
) -> tuple[Path, str]:
    """The checkpoint directory to load, and how it came about."""
    config = TINY_CODEC_CONFIG if tiny else NeuCodecConfig.official()
    kind = "random tiny" if tiny else "random official-size"
    if codec_dir is not None and any(
        (codec_dir / name).is_file() for name in (PICKLE_FILE, SAFETENSORS_FILE)
    ):
        return codec_dir, f"checkpoint {codec_dir}"
    target = codec_dir if codec_dir is not None else tmp / "codec"
    started = time.perf_counter()
    write_codec_checkpoint(target, config, seed=seed, with_encoder=with_encoder)
    what = "codec (decoder + encoder)" if with_encoder else "decoder"
    print(f"wrote {kind} {what} to {target} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return target, kind


async def stream(worker: CodecWorker, windows: list[list[int]], latencies: list[float]) -> float:
    """Decode ``windows`` one after another; append each latency (s); return audio samples decoded."""
    samples = 0
    for codes in windows:
        started = time.perf_counter()
        audio = await worker.decode(codes)
        latencies.append(time.perf_counter() - started)
        samples += audio.shape[0]
    return samples


async def measure(
    worker: CodecWorker, config: NeuCodecConfig, n_streams: int, sizes: list[int], repeats: int, seed: int
) -> dict[str, float]:
    """Run ``n_streams`` concurrent streams; throughput and latency percentiles."""
    rng = np.random.default_rng(seed)
    plans = [
        [rng.integers(0, config.codebook_size, size).tolist() for _ in range(repeats) for size in sizes]
        for _ in range(n_streams)
    ]
    latencies: list[float] = []
    started = time.perf_counter()
    samples = await asyncio.gather(*(stream(worker, plan, latencies) for plan in plans))
    wall = time.perf_counter() - started
    audio_s = sum(samples) / config.sample_rate
    ms = np.asarray(latencies) * 1000
    return {
        "streams": n_streams,
        "decodes": len(latencies),
        "audio_s": round(audio_s, 2),
        "wall_s": round(wall, 3),
        "audio_s_per_s": round(audio_s / wall, 2),
        "latency_ms_p50": round(float(np.percentile(ms, 50)), 1),
        "latency_ms_p95": round(float(np.percentile(ms, 95)), 1),
        "latency_ms_max": round(float(ms.max()), 1),
    }


async def run(
    codec_dir: Path, device: torch.device, streams: list[int], sizes: list[int], repeats: int, seed: int
) -> tuple[NeuCodecConfig, list[dict[str, float]]]:
    """Load the decoder, warm up, and measure each stream count in turn."""
    decoder = await asyncio.to_thread(load_decoder, str(codec_dir), device)
    worker = CodecWorker(decoder, device)
    worker.start()
    try:
        rng = np.random.default_rng(seed)
        for size in sizes:
            await worker.decode(rng.integers(0, decoder.config.codebook_size, size).tolist())
        rows = []
        for n in streams:
            rows.append(await measure(worker, decoder.config, n, sizes, repeats, seed + n))
            print(f"  {n} stream(s): {rows[-1]['audio_s_per_s']} audio s / s", file=sys.stderr)
    finally:
        await worker.close()
    return decoder.config, rows


async def encode_stream(worker: CodecWorker, clips: list[np.ndarray], latencies: list[float]) -> float:
    """Encode ``clips`` one after another; append each latency (s); return audio seconds encoded."""
    seconds = 0.0
    for clip in clips:
        started = time.perf_counter()
        codes = await worker.encode(clip)
        latencies.append(time.perf_counter() - started)
        assert len(codes) == frames_for(clip.shape[0])
        seconds += clip.shape[0] / SAMPLE_RATE
    return seconds


def noise_clip(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """Quiet white noise at 16 kHz (speed does not depend on the content)."""
    return (rng.standard_normal(round(seconds * SAMPLE_RATE)) * 0.1).astype(np.float32)


async def measure_encode(
    worker: CodecWorker, n_streams: int, clip_s: list[float], repeats: int, seed: int
) -> dict[str, float]:
    """Run ``n_streams`` concurrent encode streams; throughput and latency percentiles."""
    rng = np.random.default_rng(seed)
    plans = [[noise_clip(s, rng) for _ in range(repeats) for s in clip_s] for _ in range(n_streams)]
    latencies: list[float] = []
    started = time.perf_counter()
    seconds = await asyncio.gather(*(encode_stream(worker, plan, latencies) for plan in plans))
    wall = time.perf_counter() - started
    ms = np.asarray(latencies) * 1000
    return {
        "streams": n_streams,
        "encodes": len(latencies),
        "audio_s": round(sum(seconds), 2),
        "wall_s": round(wall, 3),
        "audio_s_per_s": round(sum(seconds) / wall, 3),
        "latency_ms_p50": round(float(np.percentile(ms, 50)), 1),
        "latency_ms_p95": round(float(np.percentile(ms, 95)), 1),
        "latency_ms_max": round(float(ms.max()), 1),
    }


async def run_encode(
    codec_dir: Path, device: torch.device, streams: list[int], clip_s: list[float], repeats: int, seed: int
) -> tuple[NeuCodecConfig, list[dict[str, float]]]:
    """Load decoder and encoder, warm up, and measure each stream count in turn."""
    decoder = await asyncio.to_thread(load_decoder, str(codec_dir), device)
    encoder = await asyncio.to_thread(load_encoder, str(codec_dir), device)
    worker = CodecWorker(decoder, device, encoder=encoder)
    worker.start()
    try:
        rng = np.random.default_rng(seed)
        for seconds in clip_s:
            await worker.encode(noise_clip(seconds, rng))
        rows = []
        for n in streams:
            rows.append(await measure_encode(worker, n, clip_s, repeats, seed + n))
            print(f"  {n} stream(s): {rows[-1]['audio_s_per_s']} audio s / s", file=sys.stderr)
    finally:
        await worker.close()
    return decoder.config, rows


def table(rows: list[dict[str, float]], unit: str = "decodes") -> str:
    """One line per stream count."""
    head = f"{'streams':>8}{unit:>9}{'audio s':>10}{'wall s':>9}{'audio s/s':>11}{'p50 ms':>9}{'p95 ms':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['streams']:>8}{r[unit]:>9}{r['audio_s']:>10.1f}{r['wall_s']:>9.2f}"
            f"{r['audio_s_per_s']:>11.2f}{r['latency_ms_p50']:>9.0f}{r['latency_ms_p95']:>9.0f}"
        )
    return "\n".join(lines)


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _floats(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=["decode", "encode"], default="decode")
    parser.add_argument("--codec-dir", type=Path, help="checkpoint dir to reuse, or to write once and keep")
    parser.add_argument("--tiny", action="store_true", help="tiny random codec (checks the bench itself)")
    parser.add_argument("--device", default="", help='"" = cuda if available, else cpu')
    parser.add_argument("--streams", type=_ints, default=[1, 4, 8], help="comma-separated stream counts")
    parser.add_argument("--windows", type=_ints, default=[100, 200, 400], help="codes per window, in order")
    parser.add_argument("--clips", type=_floats, default=[5.0, 10.0], help="encode: clip seconds, in order")
    parser.add_argument("--repeats", type=int, default=1, help="passes over --windows/--clips per stream")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="file name for the JSON under bench/results/")
    args = parser.parse_args(argv)

    device = resolve_device(args.device)
    encode = args.mode == "encode"
    with tempfile.TemporaryDirectory() as tmp:
        codec_dir, kind = prepare_checkpoint(args.codec_dir, Path(tmp), args.tiny, args.seed, encode)
        started = time.perf_counter()
        if encode:
            config, rows = asyncio.run(
                run_encode(codec_dir, device, args.streams, args.clips, args.repeats, args.seed)
            )
        else:
            config, rows = asyncio.run(
                run(codec_dir, device, args.streams, args.windows, args.repeats, args.seed)
            )
    report = {
        "bench": "codec",
        "mode": args.mode,
        "encoder" if encode else "decoder": kind,
        "codec_config": config.to_dict(),
        "device": str(device),
        "cpu": cpu_model(),
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        **({"clips_s": args.clips} if encode else {"windows": args.windows}),
        "repeats": args.repeats,
        "seed": args.seed,
        "elapsed_s": round(time.perf_counter() - started, 1),
        "results": rows,
    }
    text = json.dumps(report)
    print(text)
    print(table(rows, "encodes" if encode else "decodes"), file=sys.stderr)
    if args.out:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        path = RESULTS_DIR / Path(args.out).name
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
