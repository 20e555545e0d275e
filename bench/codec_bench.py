"""Codec throughput: audio seconds produced per wall second, per engine configuration, in one run.

    python -m bench.codec_bench [--mode decode|encode|shapes|packed] [--codec-dir DIR] [--device ""|cpu|cuda]
        [--engines baseline,batched,batched+bf16] [--streams 1,8] [--seconds 20] [--rate 0] [--out F.json]

Decode mode (the default) compares engines in the same run, stream count by stream count:

- ``baseline``: the unbatched fp32 eager decoder, one window at a time, the stitcher's natural windows;
- ``batched``: cross-request batching (2 ms window, up to 16) with bucketed window lengths, fp32;
- ``+bf16``: the decoder in bfloat16 (float32 ISTFT); ``+graphs``: CUDA graphs per (batch, bucket);
  ``+compile``: torch.compile (inductor).

Each of N concurrent streams speaks random utterances (``--utterance-s``, default 3 to 12 s; about
``--seconds`` of audio per stream) through a real ``Stitcher`` with the server's default schedule, fed
10 codes at a time at ``--rate`` codes/s (0 = as fast as possible: the throughput ceiling; 50 = real
time). Throughput counts the audio the streams emit (context decoded twice is cost, not output).
Decode waits are per window, from the stitcher's call to its result. One warmup decode per window
length first. The precision row gives each dtype's SNR against float32 on the same windows.

The decoder is an official-size random checkpoint (speed does not depend on the weight values),
written to a temp dir by our fixtures tool unless ``--codec-dir`` names a directory that already holds
one (an empty or missing ``--codec-dir`` is written and kept, to reuse next time).

Encode mode (``--mode encode``, what voice conversion pays per reference clip): each stream encodes
clips of ``--clips`` seconds (default 5 and 10 s of 16 kHz noise) in turn, ``--repeats`` times. Streams
that run together send clips of the same length at the same moment, so the worker batches them
(queued encodes of equal padded length run as one forward pass); real uploads rarely share a padded
length (a 20 ms bucket), so the 1-stream row is the realistic per-clip cost. The checkpoint is an
official-size random one with the encoder (~3.3 GB: w2v-bert with all 24 layers as the official file
has them, of which 16 are built); ``--codec-dir`` reuses one. One warmup encode per clip length.

Shapes mode (``--mode shapes``, CPU: what ``CODEC_PREPACK`` buys): one decoder call per batch x codes shape
(``--shapes``, default 1x20,1x64,1x256,4x64), per dtype (``--dtypes``), the plain decoder against the same
decoder with its weights prepacked (``app.codec.prepack``), the two timed alternately ``--runs`` times
after one warmup each (medians). Each row also gives the prepacked decode's relative squared error
against the plain one, and for a batch the largest difference between its rows and each row decoded
alone (prepacked). The load average before and after is in the JSON: on a shared machine, compare the
two columns of one run rather than runs.

Packed mode (``--mode packed``, CPU: what packing windows of different lengths into one call buys): for
each mix of window lengths (``--mixes``, ``+`` between the lengths of one mix), per dtype, the prepacked
decoder's lone calls one after the other against one packed call of all of them
(``app.families.neucodec.codec.packed``), timed alternately ``--runs`` times after one warmup each
(medians), and the largest difference between a packed window's audio and its lone decode.

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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from app.audio.stitcher import Stitcher, StitchSchedule
from app.codec.batcher import BatchStats
from app.codec.precision import cpu_flags
from app.codec.prepack import prepack_for_cpu
from app.config import Settings
from app.core.device import resolve_device
from app.families.neucodec.codec.config import NeuCodecConfig
from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.codec.encoder import frames_for
from app.families.neucodec.codec.encoder_config import SAMPLE_RATE
from app.families.neucodec.codec.loading import PICKLE_FILE, SAFETENSORS_FILE, load_decoder, load_encoder
from app.families.neucodec.codec.worker import CodecOptions, CodecWorker
from app.families.neucodec.family import stitch_schedule
from app.families.neucodec.fixtures.codec import TINY_CODEC_CONFIG, write_codec_checkpoint
from bench.saving import save_report


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


Decode = Callable[[list[int], float | None], Awaitable[np.ndarray]]
SERVER = Settings(_env_file=None)
"""The server's settings (defaults, or this environment's values as the server would read them): the
stitcher schedule and the codec buckets the bench decodes with, so it never drifts from the server."""
BUCKETS = tuple(SERVER.CODEC_BUCKETS)
DELTA_CODES = 10  # codes per LM delta pushed into the stitcher


@dataclass(frozen=True)
class Variant:
    """One codec configuration the bench compares: batching, buckets, dtype, graphs, compile."""

    name: str
    batched: bool
    dtype: str = "float32"
    graphs: bool = False
    compile: bool = False

    def options(self) -> CodecOptions:
        if not self.batched:  # the unbatched baseline: one window at a time, natural window lengths
            return CodecOptions(max_batch=1, window_s=0.0)
        return CodecOptions(
            batching="on",  # also on a CPU, where the server's default (auto) decodes one at a time
            max_batch=16,
            window_s=0.002,
            cuda_graphs=self.graphs,
            graph_lengths=BUCKETS if self.graphs else (),
            max_graphs=128,
            compile=self.compile,
        )

    def schedule(self) -> StitchSchedule:
        first, overlap = SERVER.DEFAULT_PLAYBACK_SPEED, SERVER.DEFAULT_PLAYBACK_OVERLAP_SPEED
        return stitch_schedule(SERVER, first, overlap, buckets=BUCKETS if self.batched else ())


ENGINES = {
    "baseline": Variant("baseline", batched=False),
    "batched": Variant("batched", batched=True),
    "batched+bf16": Variant("batched+bf16", batched=True, dtype="bfloat16"),
    "batched+graphs": Variant("batched+graphs", batched=True, graphs=True),
    "batched+bf16+graphs": Variant("batched+bf16+graphs", batched=True, dtype="bfloat16", graphs=True),
    "batched+compile": Variant("batched+compile", batched=True, compile=True),
    "batched+bf16+compile": Variant("batched+bf16+compile", batched=True, dtype="bfloat16", compile=True),
}


def utterances(
    rng: np.random.Generator, seconds: float, low_s: float, high_s: float, vocab: int
) -> list[list[int]]:
    """Random utterances of ``low_s``..``high_s`` seconds (50 codes/s) adding up to ``seconds``."""
    plan, total = [], 0.0
    while total < seconds:
        length = float(rng.uniform(low_s, high_s))
        plan.append(rng.integers(0, vocab, round(length * 50)).tolist())
        total += length
    return plan


async def speak(
    decode: Decode, schedule: StitchSchedule, codes: list[int], rate: float, waits: list[float]
) -> int:
    """One utterance through a real Stitcher, fed ``DELTA_CODES`` at a time at ``rate`` codes/s (0 = as
    fast as possible); appends each decode's wait (s) to ``waits``; returns the samples emitted."""

    async def timed(window: list[int], deadline: float | None = None) -> np.ndarray:
        started = time.perf_counter()
        audio = await decode(window, deadline)
        waits.append(time.perf_counter() - started)
        return audio

    stitcher = Stitcher(timed, schedule)
    samples = 0
    started = time.perf_counter()
    for pos in range(0, len(codes), DELTA_CODES):
        if rate > 0:  # the LM's pace: this delta exists only at pos / rate
            await asyncio.sleep(max(0.0, started + pos / rate - time.perf_counter()))
        for chunk in await stitcher.push(codes[pos : pos + DELTA_CODES]):
            samples += chunk.shape[0]
    for chunk in await stitcher.flush():
        samples += chunk.shape[0]
    return samples


def snr_db(reference: np.ndarray, other: np.ndarray) -> float:
    """10 log10(|ref|^2 / |ref - other|^2)."""
    noise = float(np.sum((reference - other) ** 2))
    return float(10 * np.log10(float(np.sum(reference**2)) / max(noise, 1e-30)))


async def measure(
    engine: Variant, decoder: NeuCodecDecoder, device: torch.device, n_streams: int, args: argparse.Namespace
) -> dict[str, object]:
    """``n_streams`` concurrent streams of utterances through one engine: throughput, batches, waits."""
    worker = CodecWorker(decoder, device, options=engine.options())
    worker.start()
    schedule = engine.schedule()
    try:
        rng = np.random.default_rng(args.seed)
        for length in sorted({stop - lo for _, _, lo, stop in schedule.plan(2000)}):  # warm every length
            await worker.decode(rng.integers(0, decoder.config.codebook_size, length).tolist())
        worker.decoder_batcher.stats = BatchStats()
        plans = [
            utterances(np.random.default_rng(args.seed + i), args.seconds, *args.utterance_s,
                       decoder.config.codebook_size)
            for i in range(n_streams)
        ]  # fmt: skip
        waits: list[float] = []

        async def one_stream(plan: list[list[int]]) -> int:
            return sum([await speak(worker.decode, schedule, codes, args.rate, waits) for codes in plan])

        started = time.perf_counter()
        samples = await asyncio.gather(*(one_stream(plan) for plan in plans))
        wall = time.perf_counter() - started
    finally:
        await worker.close()
    stats = worker.decoder_batcher.stats
    audio_s = sum(samples) / decoder.config.sample_rate
    ms = np.asarray(waits) * 1000
    return {
        "engine": engine.name,
        "streams": n_streams,
        "decodes": len(waits),
        "audio_s": round(audio_s, 2),
        "wall_s": round(wall, 3),
        "audio_s_per_s": round(audio_s / wall, 2),
        "batch_sizes": {str(size): count for size, count in sorted(stats.sizes.items())},
        "mean_batch": round(
            sum(k * v for k, v in stats.sizes.items()) / max(1, sum(stats.sizes.values())), 2
        ),
        "graph_hits": stats.graph_hits,
        "wait_ms_p50": round(float(np.percentile(ms, 50)), 1),
        "wait_ms_p95": round(float(np.percentile(ms, 95)), 1),
    }


def precision(decoders: dict[str, NeuCodecDecoder], device: torch.device, seed: int) -> dict[str, float]:
    """SNR (dB) of each dtype's decode against float32 on the same random windows (lowest of four)."""
    rng = np.random.default_rng(seed)
    codes = torch.from_numpy(rng.integers(0, 65536, (4, 256))).to(device)
    with torch.inference_mode():
        reference = decoders["float32"](codes).float().cpu().numpy()
        return {
            dtype: round(
                min(snr_db(r, o) for r, o in zip(reference, dec(codes).float().cpu().numpy(), strict=True)), 1
            )
            for dtype, dec in decoders.items()
            if dtype != "float32"
        }


async def run(
    codec_dir: Path, device: torch.device, engines: list[Variant], args: argparse.Namespace
) -> tuple[NeuCodecConfig, list[dict[str, object]], dict[str, float]]:
    """Load the decoder (and its bf16 copy when an engine needs it) and measure every engine for
    every stream count, engines interleaved per stream count so they share the machine's state."""
    decoders = {"float32": await asyncio.to_thread(load_decoder, str(codec_dir), device)}
    for dtype in sorted({e.dtype for e in engines} - {"float32"}):
        decoders[dtype] = (await asyncio.to_thread(load_decoder, str(codec_dir), device)).cast(
            getattr(torch, dtype)
        )
    rows = []
    for n in args.streams:
        for engine in engines:
            rows.append(await measure(engine, decoders[engine.dtype], device, n, args))
            base = next(r for r in rows if r["engine"] == engines[0].name and r["streams"] == n)
            rows[-1]["vs_first"] = round(rows[-1]["audio_s_per_s"] / base["audio_s_per_s"], 2)
            print(f"  {n} stream(s) {engine.name}: {rows[-1]['audio_s_per_s']} audio s / s "
                  f"(x{rows[-1]['vs_first']})", file=sys.stderr)  # fmt: skip
    return decoders["float32"].config, rows, precision(decoders, device, args.seed)


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


def timed_ms(forward: Callable[[torch.Tensor], torch.Tensor], codes: torch.Tensor) -> float:
    """Wall milliseconds of one ``forward(codes)``."""
    started = time.perf_counter()
    forward(codes)
    return (time.perf_counter() - started) * 1000


def measure_shapes(
    codec_dir: Path, dtypes: list[str], shapes: list[tuple[int, int]], runs: int, seed: int
) -> tuple[NeuCodecConfig, list[dict[str, object]]]:
    """Per dtype and batch x codes shape: the plain decoder's and the prepacked decoder's median call time
    (timed alternately), the prepacked decode's error against the plain one, and its batch exactness."""
    rows: list[dict[str, object]] = []
    config = NeuCodecConfig.official()
    for dtype in dtypes:
        plain = load_decoder(str(codec_dir)).cast(getattr(torch, dtype))
        packed = load_decoder(str(codec_dir)).cast(getattr(torch, dtype))
        report = prepack_for_cpu(packed, f"{dtype} decoder")
        config = plain.config
        generator = torch.Generator().manual_seed(seed)
        for batch, length in shapes:
            codes = torch.randint(0, config.codebook_size, (batch, length), generator=generator)
            with torch.inference_mode():
                want, got = plain(codes), packed(codes)  # also the warmup of each
                alone = torch.cat([packed(codes[row : row + 1]) for row in range(batch)])
                times: dict[str, list[float]] = {"plain": [], "prepacked": []}
                for _ in range(runs):
                    times["plain"].append(timed_ms(plain, codes))
                    times["prepacked"].append(timed_ms(packed, codes))
            plain_ms, packed_ms = (float(np.median(times[name])) for name in ("plain", "prepacked"))
            rows.append(
                {
                    "dtype": dtype,
                    "batch": batch,
                    "codes": length,
                    "plain_ms": round(plain_ms, 1),
                    "prepacked_ms": round(packed_ms, 1),
                    "speedup": round(plain_ms / packed_ms, 2),
                    "rel_sq_error": float((got - want).pow(2).sum() / want.pow(2).sum()),
                    "batch_vs_alone_max_abs": float((got - alone).abs().max()),
                    "layers_prepacked": report.packed,
                    "layers_plain": len(report.plain),
                    "convolutions_left": report.convolutions_left,
                    "plain_ms_all": [round(t, 1) for t in times["plain"]],
                    "prepacked_ms_all": [round(t, 1) for t in times["prepacked"]],
                }
            )
            print(f"  {dtype} {batch}x{length}: {plain_ms:.0f} -> {packed_ms:.0f} ms", file=sys.stderr)
        del plain, packed
    return config, rows


def time_mix(decoder: NeuCodecDecoder, windows: list[torch.Tensor], runs: int) -> dict[str, object]:
    """One mix of packed mode: ``windows`` decoded by lone calls in turn and by one packed call."""
    lengths = [len(window) for window in windows]
    codes = torch.cat(windows)
    calls: dict[str, Callable[[], list[torch.Tensor]]] = {
        "lone": lambda: [decoder(window[None])[0] for window in windows],
        "packed": lambda: decoder.forward_packed(codes, lengths),
    }
    times: dict[str, list[float]] = {name: [] for name in calls}
    with torch.inference_mode():
        pairs = zip(calls["lone"](), calls["packed"](), strict=True)
        diff = max(float((a - b).abs().max()) for a, b in pairs)
        for _ in range(runs):
            for name, call in calls.items():
                started = time.perf_counter()
                call()
                times[name].append((time.perf_counter() - started) * 1000)
    lone_ms, packed_ms = (float(np.median(times[name])) for name in calls)
    return {
        "lengths": lengths,
        "lone_ms": round(lone_ms, 1),
        "packed_ms": round(packed_ms, 1),
        "ratio": round(packed_ms / lone_ms, 3),
        "packed_vs_alone_max_abs": diff,
        "lone_ms_all": [round(t, 1) for t in times["lone"]],
        "packed_ms_all": [round(t, 1) for t in times["packed"]],
    }


def measure_packed(
    codec_dir: Path, dtypes: list[str], mixes: list[list[int]], runs: int, seed: int
) -> tuple[NeuCodecConfig, list[dict[str, object]]]:
    """Per dtype and mix of window lengths: the median time of the windows' lone calls in turn and of one
    packed call (timed alternately), and the packed windows' largest difference from their lone decode."""
    rows: list[dict[str, object]] = []
    config = NeuCodecConfig.official()
    for dtype in dtypes:
        decoder = load_decoder(str(codec_dir)).cast(getattr(torch, dtype))
        prepack_for_cpu(decoder, f"{dtype} decoder")
        config = decoder.config
        generator = torch.Generator().manual_seed(seed)
        for lengths in mixes:
            windows = [torch.randint(0, config.codebook_size, (n,), generator=generator) for n in lengths]
            row = {"dtype": dtype, **time_mix(decoder, windows, runs)}
            rows.append(row)
            mix = "+".join(map(str, lengths))
            print(f"  {dtype} {mix}: {row['lone_ms']} -> {row['packed_ms']} ms", file=sys.stderr)
    return config, rows


def packed_table(rows: list[dict[str, object]]) -> str:
    """One line per (dtype, mix) of packed mode."""
    head = f"{'dtype':<10}{'window lengths':>32}{'lone ms':>10}{'packed ms':>11}{'ratio':>7}{'max diff':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        mix = "+".join(str(n) for n in r["lengths"])  # type: ignore[attr-defined]
        lines.append(
            f"{r['dtype']:<10}{mix:>32}{r['lone_ms']:>10.1f}{r['packed_ms']:>11.1f}{r['ratio']:>7.2f}"
            f"{r['packed_vs_alone_max_abs']:>10.1e}"
        )
    return "\n".join(lines)


def _mixes(text: str) -> list[list[int]]:
    """``45+60,30+35+45`` -> ``[[45, 60], [30, 35, 45]]``."""
    return [[int(n) for n in mix.split("+")] for mix in text.split(",") if mix.strip()]


def shapes_table(rows: list[dict[str, object]]) -> str:
    """One line per (dtype, shape) of shapes mode."""
    head = (
        f"{'dtype':<10}{'B x T':>8}{'plain ms':>10}{'prepacked ms':>14}{'x':>6}{'rel sq err':>12}"
        f"{'batch diff':>12}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['dtype']:<10}{str(r['batch']) + 'x' + str(r['codes']):>8}{r['plain_ms']:>10.1f}"
            f"{r['prepacked_ms']:>14.1f}{r['speedup']:>6.2f}{r['rel_sq_error']:>12.1e}"
            f"{r['batch_vs_alone_max_abs']:>12.1e}"
        )
    return "\n".join(lines)


def _shapes(text: str) -> list[tuple[int, int]]:
    """``1x20,4x64`` -> ``[(1, 20), (4, 64)]``."""
    pairs = [part.strip().lower().split("x") for part in text.split(",") if part.strip()]
    return [(int(batch), int(length)) for batch, length in pairs]


def decode_table(rows: list[dict[str, object]]) -> str:
    """One line per (stream count, engine)."""
    head = (
        f"{'streams':>8} {'engine':<22}{'decodes':>8}{'audio s':>9}{'wall s':>8}{'audio s/s':>10}"
        f"{'x first':>8}{'batch':>7}{'p50 ms':>8}{'p95 ms':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['streams']:>8} {r['engine']:<22}{r['decodes']:>8}{r['audio_s']:>9.1f}{r['wall_s']:>8.1f}"
            f"{r['audio_s_per_s']:>10.2f}{r['vs_first']:>8.2f}{r['mean_batch']:>7.2f}"
            f"{r['wait_ms_p50']:>8.0f}{r['wait_ms_p95']:>8.0f}"
        )
    return "\n".join(lines)


def table(rows: list[dict[str, float]], unit: str = "encodes") -> str:
    """One line per stream count (encode mode)."""
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
    parser.add_argument("--mode", choices=["decode", "encode", "shapes", "packed"], default="decode")
    parser.add_argument("--codec-dir", type=Path, help="checkpoint dir to reuse, or to write once and keep")
    parser.add_argument("--tiny", action="store_true", help="tiny random codec (checks the bench itself)")
    parser.add_argument("--device", default="", help='"" = cuda if available, else cpu')
    parser.add_argument("--streams", type=_ints, default=[1, 8], help="comma-separated stream counts")
    parser.add_argument("--engines", default="", help=f"decode: comma-separated, of {', '.join(ENGINES)}")
    parser.add_argument("--seconds", type=float, default=20.0, help="decode: audio seconds per stream")
    parser.add_argument(
        "--utterance-s", type=_floats, default=[3.0, 12.0], help="decode: utterance length range"
    )
    parser.add_argument("--rate", type=float, default=0.0, help="decode: codes/s per stream; 0 = no pacing")
    parser.add_argument("--clips", type=_floats, default=[5.0, 10.0], help="encode: clip seconds, in order")
    parser.add_argument("--repeats", type=int, default=1, help="encode: passes over --clips per stream")
    parser.add_argument(
        "--shapes", type=_shapes, default=[(1, 20), (1, 64), (1, 256), (4, 64)], help="shapes: B x codes"
    )
    parser.add_argument(
        "--mixes",
        type=_mixes,
        default=_mixes("45+60+80+100,35+35+45+70+90+120+45+60,30+35+45,44+44+50+60+70,150+200"),
        help="packed: window lengths of each mix, + between lengths, comma between mixes",
    )
    parser.add_argument("--dtypes", default="float32,bfloat16", help="shapes, packed: dtypes")
    parser.add_argument("--runs", type=int, default=7, help="shapes, packed: timed calls of each case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="file name for the JSON under bench/results/")
    args = parser.parse_args(argv)

    device = resolve_device(args.device)
    encode, shapes, packed = args.mode == "encode", args.mode == "shapes", args.mode == "packed"
    if (shapes or packed) and device.type != "cpu":
        parser.error(f"--mode {args.mode} measures the CPU's prepacked decoder: use --device cpu")
    default = "baseline,batched,batched+bf16" + (
        ",batched+graphs,batched+bf16+graphs" if device.type == "cuda" else ""
    )
    engines = [ENGINES[name.strip()] for name in (args.engines or default).split(",") if name.strip()]
    snr: dict[str, float] = {}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        codec_dir, kind = prepare_checkpoint(args.codec_dir, Path(tmp), args.tiny, args.seed, encode)
        started = time.perf_counter()
        if encode:
            config, rows = asyncio.run(
                run_encode(codec_dir, device, args.streams, args.clips, args.repeats, args.seed)
            )
        elif shapes or packed:
            dtypes = [name.strip() for name in args.dtypes.split(",") if name.strip()]
            if shapes:
                config, rows = measure_shapes(codec_dir, dtypes, args.shapes, args.runs, args.seed)
            else:
                config, rows = measure_packed(codec_dir, dtypes, args.mixes, args.runs, args.seed)
        else:
            config, rows, snr = asyncio.run(run(codec_dir, device, engines, args))
    if encode:
        details: dict[str, object] = {"clips_s": args.clips, "repeats": args.repeats}
    elif shapes or packed:
        flags = cpu_flags()
        details = {
            "cpu_flags": {flag: flag in flags for flag in ("avx2", "avx512f", "avx512_bf16", "amx_bf16")},
            "dtypes": dtypes,
            "runs": args.runs,
            "load_average_1min": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        }
    else:
        details = {
            "engines": [engine.name for engine in engines],
            "seconds_per_stream": args.seconds,
            "utterance_s": args.utterance_s,
            "rate_codes_per_s": args.rate,
            "schedule": {
                name: getattr(SERVER, name)
                for name in (
                    "DEFAULT_PLAYBACK_SPEED",
                    "DEFAULT_PLAYBACK_OVERLAP_SPEED",
                    "STREAM_CHUNK_GROWTH",
                    "STREAM_MAX_CHUNK_S",
                    "STREAM_PAST_CONTEXT_S",
                    "CROSSFADE_MS",
                    "STREAM_REDECODE_BUDGET",
                )
            },
            "buckets": BUCKETS,
            "snr_db_vs_float32": snr,
        }
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
        **details,
        "seed": args.seed,
        "elapsed_s": round(time.perf_counter() - started, 1),
        "results": rows,
    }
    text = json.dumps(report)
    print(text)
    if encode:
        print(table(rows), file=sys.stderr)
    elif shapes or packed:
        print((shapes_table if shapes else packed_table)(rows), file=sys.stderr)
    else:
        print(decode_table(rows), file=sys.stderr)
    if snr:
        print(f"SNR vs float32 (dB): {snr}", file=sys.stderr)
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
