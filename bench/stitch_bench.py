"""Streamed vs one-shot decode of the same codes: how far does a window schedule move the audio, and
how many codes does it decode per code it emits?

    python -m bench.stitch_bench [--codec-dir DIR | --full-size] [--seconds 3,5,10,20] [--repeats 2]
        [--schedules NAME,...] [--schedule NAME=FIRST,FUTURE,GROWTH,MAX,PAST,XFADE_MS[,BUDGET]] [--natural]
        [--out NAME.json]

For each schedule and each random code sequence (``--repeats`` of each length in ``--seconds``), the
codes go through ``Stitcher`` one at a time (as an LM streams them) and, separately, through one
decode of the whole sequence. Windows take the server's default decode lengths (``CODEC_BUCKETS``, as
the server uses them on an accelerator) unless ``--natural`` (as it decodes on a CPU). Per utterance it
reports:

- ``snr_db``: the SNR of the streamed audio against the one-shot audio, over the whole utterance;
- ``seam_snr_db``: the same SNR over the samples within ``--seam-ms`` of a window join only (all joins
  of the utterance pooled; the samples where a crossfade or a cut would show), ``later_seam_snr_db``
  over the joins after the first one (the first join's left side is the first window's audio, which a
  short first window decodes from few codes), and ``body_snr_db`` over the rest (where windows differ
  from the one-shot decode only by what they did not see);
- the RMS envelope difference over 20 ms frames, ``|20 log10(env_stream / env_oneshot)|`` over frames
  at most ``--floor-db`` below the loudest one-shot frame (median, worst and where the worst is);
- ``decoded_per_emitted``: codes decoded per code emitted (the context overhead).

It also prints, without decoding, the codes decoded per code emitted for utterances of 3, 5, 10 and
20 s under each schedule, with natural window lengths and with the default buckets.

The decoder has random weights (a tiny one written to a temp dir by default; ``--full-size`` writes the
official-size decoder, slow on CPU): it makes noise, not speech, so the numbers measure the error the
stitching schedule adds to a non-causal decoder, not audio quality. Prints JSON and a short table;
``--out`` also writes the JSON to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from app.audio.stitcher import Stitcher, StitchSchedule
from app.core import defaults
from app.families.neucodec.codec.config import NeuCodecConfig
from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.codec.loading import load_decoder
from app.families.neucodec.fixtures.codec import TINY_CODEC_CONFIG, write_codec_checkpoint
from bench.saving import save_report

FRAMES_PER_S = 50  # 20 ms envelope frames
Seconds = tuple[float, float, float, float, float, float, float]
"""(playback_speed, playback_overlap_speed, growth, max_chunk_s, past_context_s, crossfade_ms,
redecode_budget)"""
DEFAULT: Seconds = (
    defaults.DEFAULT_PLAYBACK_SPEED,
    defaults.DEFAULT_PLAYBACK_OVERLAP_SPEED,
    defaults.STREAM_CHUNK_GROWTH,
    defaults.STREAM_MAX_CHUNK_S,
    defaults.STREAM_PAST_CONTEXT_S,
    defaults.CROSSFADE_MS,
    defaults.STREAM_REDECODE_BUDGET,
)
SCHEDULES: dict[str, Seconds] = {
    "default": DEFAULT,  # the server's defaults: a 0.2 s first window growing x6 to 15 s
    "previous_2s": (2.0, 0.2, 2.0, 10.0, 0.3, 100.0, 0.2),  # the defaults before it (C below)
    "before_17": (2.0, 0.2, 2.0, 10.0, 3.0, 12.0, 0.0),  # the previous defaults
    # the candidates (docs/benchmarks.md, "Stitch schedule"); the names are those of
    # bench/results/stitch_sweep*.json
    "past_0.3": (2.0, 0.2, 2.0, 10.0, 0.3, 12.0, 0.0),
    "past_1.0": (2.0, 0.2, 2.0, 10.0, 1.0, 12.0, 0.0),
    "past_0.5_fut_0.1": (2.0, 0.1, 2.0, 10.0, 0.5, 12.0, 0.0),
    "past_0.4_x4_15s": (2.0, 0.2, 4.0, 15.0, 0.4, 12.0, 0.0),
    "past_0.3_x4_15s": (2.0, 0.2, 4.0, 15.0, 0.3, 12.0, 0.0),
    "past_0.5_fut_0.1_x4_15s": (2.0, 0.1, 4.0, 15.0, 0.5, 12.0, 0.0),
    "past_1.0_x4_15s": (2.0, 0.2, 4.0, 15.0, 1.0, 12.0, 0.0),
    "past_3.0_x4_15s": (2.0, 0.2, 4.0, 15.0, 3.0, 12.0, 0.0),
    "past_0.4_x4_15s_xf_100": (2.0, 0.2, 4.0, 15.0, 0.4, 100.0, 0.0),
    "A_x2_p0.3_xf12_b0.2": (2.0, 0.2, 2.0, 10.0, 0.3, 12.0, 0.2),
    "B_x4_p0.3_xf100_b0.2": (2.0, 0.2, 4.0, 15.0, 0.3, 100.0, 0.2),
    "C_x2_p0.3_xf100_b0.2": (2.0, 0.2, 2.0, 10.0, 0.3, 100.0, 0.2),
    "C_x2_p0.3_xf100_b0": (2.0, 0.2, 2.0, 10.0, 0.3, 100.0, 0.0),
    "D_x4_p0.3_xf100_b0": (2.0, 0.2, 4.0, 15.0, 0.3, 100.0, 0.0),
    "E_first1_x4_p0.3_xf100_b0.2": (1.0, 0.2, 4.0, 15.0, 0.3, 100.0, 0.2),
    "fixed_1.5s_no_context": (1.5, 0.0, 1.0, 1.5, 0.0, 0.0, 0.0),  # baseline: hard cuts, no context
}
BUCKETS = defaults.CODEC_BUCKETS  # CODEC_BUCKETS' default
RATIO_SECONDS = (3, 5, 10, 20)


def envelope(audio: np.ndarray, frame: int) -> np.ndarray:
    """RMS per whole frame: audio [N] -> [N // frame]."""
    frames = audio[: len(audio) // frame * frame].astype(np.float64).reshape(-1, frame)
    return np.sqrt((frames**2).mean(axis=1))


def snr(stream: np.ndarray, oneshot: np.ndarray) -> float:
    """SNR in dB of ``stream`` against ``oneshot`` (both [N]); inf when equal, nan when empty."""
    if not oneshot.size:
        return float("nan")
    err = np.sum((stream.astype(np.float64) - oneshot) ** 2)
    return float(10 * np.log10(np.sum(oneshot.astype(np.float64) ** 2) / err)) if err > 0 else float("inf")


def compare(
    stream: np.ndarray,
    oneshot: np.ndarray,
    seams: list[int],
    sample_rate: int,
    floor_db: float,
    seam_ms: float,
) -> dict[str, float]:
    """Envelope difference (dB, 20 ms frames) and SNRs of ``stream`` against ``oneshot``, both [N];
    ``seams`` are the sample indices of the window joins."""
    frame = sample_rate // FRAMES_PER_S
    env_s, env_o = envelope(stream, frame), envelope(oneshot, frame)
    keep = env_o > max(env_o.max() * 10 ** (-floor_db / 20), 1e-9)
    diff = np.abs(20 * np.log10(np.maximum(env_s[keep], 1e-12) / env_o[keep]))
    worst = int(np.flatnonzero(keep)[np.argmax(diff)])
    half = round(sample_rate * seam_ms / 1000)

    def within(joins: list[int]) -> np.ndarray:
        """[N]: the samples within seam_ms of one of ``joins``."""
        mask = np.zeros(len(oneshot), dtype=bool)
        for seam in joins:
            mask[max(0, seam - half) : seam + half] = True
        return mask

    near, later = within(seams), within(seams[1:])
    return {
        "env_median_db": float(np.median(diff)),
        "env_worst_db": float(diff.max()),
        "worst_at_s": worst / FRAMES_PER_S,
        "snr_db": snr(stream, oneshot),
        "seam_snr_db": snr(stream[near], oneshot[near]),
        "later_seam_snr_db": snr(stream[later], oneshot[later]),
        "body_snr_db": snr(stream[~near], oneshot[~near]),
    }


Decode = Callable[[list[int]], np.ndarray]


async def stream_decode(
    decode_one: Decode, schedule: StitchSchedule, codes: list[int]
) -> tuple[np.ndarray, int]:
    """Codes pushed one at a time, then flushed: (audio [n * hop], codes decoded)."""
    decoded = 0

    async def decode(window: list[int], deadline: float | None = None) -> np.ndarray:
        nonlocal decoded
        decoded += len(window)
        return await asyncio.to_thread(decode_one, window)

    stitcher = Stitcher(decode, schedule)
    chunks = []
    for code in codes:
        chunks += await stitcher.push([code])
    chunks += await stitcher.flush()
    return np.concatenate(chunks), decoded


def decode_ratios(args: Seconds, tokens_per_s: int, sample_rate: int) -> dict[str, dict[str, float]]:
    """Codes decoded per code emitted for utterances of RATIO_SECONDS, natural and bucketed windows."""
    ratios = {}
    for kind, buckets in (("natural", ()), ("buckets", BUCKETS)):
        schedule = StitchSchedule.from_seconds(
            *args[:6], tokens_per_s, sample_rate, buckets=buckets, redecode_budget=args[6]
        )
        ratios[kind] = {
            f"{seconds}s": round(
                sum(stop - lo for _, _, lo, stop in schedule.plan(seconds * tokens_per_s))
                / (seconds * tokens_per_s),
                3,
            )
            for seconds in RATIO_SECONDS
        }
    return ratios


def summary(schedule: StitchSchedule, rows: list[dict]) -> dict:
    """Per-schedule aggregate of the per-utterance rows."""
    finite = [r["seam_snr_db"] for r in rows if not np.isnan(r["seam_snr_db"])]  # nan: no join
    later = [r["later_seam_snr_db"] for r in rows if not np.isnan(r["later_seam_snr_db"])]
    return {
        "schedule": {
            **schedule.__dict__,
            "crossfade_left": schedule.crossfade_left,
            "crossfade_right": schedule.crossfade_right,
        },
        "first_audio_after_codes": schedule.first_own + schedule.future_tokens,
        "env_median_db": float(np.median([r["env_median_db"] for r in rows])),
        "env_worst_db": float(max(r["env_worst_db"] for r in rows)),
        "snr_db_min": float(min(r["snr_db"] for r in rows)),
        "snr_db_median": float(np.median([r["snr_db"] for r in rows])),
        "seam_snr_db_min": float(min(finite)) if finite else float("nan"),
        "seam_snr_db_median": float(np.median(finite)) if finite else float("nan"),
        "later_seam_snr_db_median": float(np.median(later)) if later else float("nan"),
        "body_snr_db_median": float(np.median([r["body_snr_db"] for r in rows])),
        "decoded_per_emitted_max": float(max(r["decoded_per_emitted"] for r in rows)),
        "utterances": rows,
    }


def run(
    decoder: NeuCodecDecoder,
    device: torch.device,
    schedules: dict[str, Seconds],
    seconds: list[float],
    repeats: int,
    seed: int,
    floor_db: float,
    seam_ms: float,
    buckets: tuple[int, ...],
) -> dict[str, dict]:
    """All schedules over the same random utterances (``repeats`` of each length in ``seconds``)."""
    config = decoder.config
    tokens_per_s = config.sample_rate // config.hop_length
    spt = config.hop_length

    def decode_one(window: list[int]) -> np.ndarray:
        codes = torch.tensor([window], dtype=torch.long, device=device)
        return decoder.decode(codes)[0].float().cpu().numpy()

    rng = np.random.default_rng(seed)
    lengths = [round(s * tokens_per_s) for s in seconds for _ in range(repeats)]
    utterances = [rng.integers(0, config.codebook_size, n).tolist() for n in lengths]
    oneshots = [decode_one(codes) for codes in utterances]
    results: dict[str, dict] = {}
    for name, args in schedules.items():
        schedule = StitchSchedule.from_seconds(
            *args[:6], tokens_per_s, config.sample_rate, buckets=buckets, redecode_budget=args[6]
        )
        rows = []
        for codes, oneshot in zip(utterances, oneshots, strict=True):
            audio, decoded = asyncio.run(stream_decode(decode_one, schedule, codes))
            assert audio.shape == oneshot.shape
            plan = schedule.plan(len(codes))
            row: dict[str, float] = {"seconds": len(codes) / tokens_per_s, "windows": len(plan)}
            seams = [end * spt for _, end, _, _ in plan[:-1]]
            row |= compare(audio, oneshot, seams, config.sample_rate, floor_db, seam_ms)
            row["decoded_per_emitted"] = decoded / len(codes)
            rows.append(row)
        results[name] = summary(schedule, rows)
        results[name]["seconds"] = args
        results[name]["decoded_per_emitted"] = decode_ratios(args, tokens_per_s, config.sample_rate)
        print(f"{name}: done", file=sys.stderr)
    return results


def table(results: dict[str, dict]) -> str:
    """A short text summary: one line per schedule."""
    columns = [
        ("schedule", "<", 26),
        ("1st", ">", 5),
        ("env med/worst dB", ">", 18),
        ("SNR min/med", ">", 13),
        ("seam min/med", ">", 14),
        ("later seams", ">", 12),
        ("body med", ">", 10),
        ("3/5/10/20 s buckets | natural", ">", 44),
    ]
    head = "".join(f"{title:{align}{width}}" for title, align, width in columns)
    lines = [head, "-" * len(head)]
    for name, r in results.items():
        env = f"{r['env_median_db']:.3f}/{r['env_worst_db']:.2f}"
        snrs = f"{r['snr_db_min']:.1f}/{r['snr_db_median']:.1f}"
        seam = f"{r['seam_snr_db_min']:.1f}/{r['seam_snr_db_median']:.1f}"
        ratios = " | ".join(
            "/".join(f"{v:.2f}" for v in r["decoded_per_emitted"][kind].values())
            for kind in ("buckets", "natural")
        )
        lines.append(
            f"{name:<26}{r['first_audio_after_codes']:>5}{env:>18}{snrs:>13}{seam:>14}"
            f"{r['later_seam_snr_db_median']:>12.1f}"
            f"{r['body_snr_db_median']:>10.1f}{ratios:>44}"
        )
    return "\n".join(lines)


def parse_schedule(text: str) -> tuple[str, Seconds]:
    """``NAME=FIRST,FUTURE,GROWTH,MAX,PAST,XFADE_MS[,BUDGET]`` -> (name, seconds); BUDGET defaults to 0."""
    name, _, values = text.partition("=")
    numbers = tuple(float(v) for v in values.split(","))
    if not name or len(numbers) not in (6, 7):
        raise argparse.ArgumentTypeError(
            f"expected NAME=FIRST,FUTURE,GROWTH,MAX,PAST,XFADE_MS[,BUDGET], got {text!r}"
        )
    return name, (*numbers, 0.0)[:7]  # type: ignore[return-value]  # seven floats, checked above


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--codec-dir", type=Path, help="NeuCodec checkpoint directory (default: a tiny random one)"
    )
    source.add_argument(
        "--full-size", action="store_true", help="write an official-size random decoder (slow)"
    )
    parser.add_argument("--seconds", default="3,5,10,20", help="utterance lengths in seconds (CSV)")
    parser.add_argument("--repeats", type=int, default=2, help="random utterances of each length")
    parser.add_argument("--schedules", help="names from SCHEDULES to run (CSV; default: all)")
    parser.add_argument(
        "--schedule",
        type=parse_schedule,
        action="append",
        default=[],
        help="NAME=FIRST,FUTURE,GROWTH,MAX,PAST,XFADE_MS[,BUDGET]",
    )
    parser.add_argument(
        "--natural", action="store_true", help="natural window lengths instead of the buckets"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--floor-db", type=float, default=40.0, help="frames this far below the loudest are skipped"
    )
    parser.add_argument(
        "--seam-ms", type=float, default=50.0, help="samples this close to a join are the seam's"
    )
    parser.add_argument("--out", help="file name for the JSON under bench/results/")
    args = parser.parse_args(argv)

    names = args.schedules.split(",") if args.schedules else list(SCHEDULES)
    unknown = sorted(set(names) - set(SCHEDULES))
    if unknown:
        parser.error(f"unknown schedules {unknown}; known: {sorted(SCHEDULES)}")
    schedules = {name: SCHEDULES[name] for name in names} | dict(args.schedule)
    device = torch.device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        if args.codec_dir is not None:
            codec_dir, kind = args.codec_dir, f"checkpoint {args.codec_dir}"
        else:
            config = NeuCodecConfig.official() if args.full_size else TINY_CODEC_CONFIG
            codec_dir = write_codec_checkpoint(
                Path(tmp) / "codec", config, seed=args.seed, with_encoder=False
            )
            kind = "random official-size" if args.full_size else "random tiny"
        decoder = load_decoder(str(codec_dir), device)

    started = time.perf_counter()
    seconds = [float(s) for s in args.seconds.split(",")]
    buckets = () if args.natural else BUCKETS
    results = run(
        decoder, device, schedules, seconds, args.repeats, args.seed, args.floor_db, args.seam_ms, buckets
    )
    report = {
        "bench": "stitch",
        "decoder": kind,
        "codec_config": decoder.config.to_dict(),
        "device": str(device),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "seconds": seconds,
        "repeats": args.repeats,
        "windows": "natural" if args.natural else f"buckets {list(BUCKETS)}",
        "seed": args.seed,
        "floor_db": args.floor_db,
        "seam_ms": args.seam_ms,
        "elapsed_s": round(time.perf_counter() - started, 2),
        "schedules": results,
    }
    print(json.dumps(report, indent=2))
    print(table(results), file=sys.stderr)
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
