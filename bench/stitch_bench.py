"""Streamed vs one-shot decode of the same codes: how far does a window schedule move the audio?

    python -m bench.stitch_bench [--codec-dir DIR | --full-size] [--utterances 6] [--out NAME.json]

For each schedule and each random code sequence (3-12 s), the codes go through ``Stitcher`` one at a
time (as an LM streams them) and, separately, through one decode of the whole sequence. Per
utterance it reports the RMS envelope difference over 20 ms frames, ``|20 log10(env_stream /
env_oneshot)|`` over frames at most ``--floor-db`` below the loudest one-shot frame (median, worst
and where the worst frame is), the SNR of the streamed audio against the one-shot audio, and how many
codes were decoded per code of audio (context overhead). It also prints, without decoding, the codes
decoded per code emitted for utterances of 3, 5, 10 and 20 s under each schedule, with natural window
lengths (a CPU, which decodes one window at a time) and with the server's default buckets (an
accelerator, which batches windows of equal length).

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
from app.codec.neucodec.config import NeuCodecConfig
from app.codec.neucodec.decoder import NeuCodecDecoder
from app.codec.neucodec.loading import load_decoder
from app.tools.fixtures.codec import TINY_CODEC_CONFIG, write_codec_checkpoint

RESULTS_DIR = Path(__file__).resolve().parent / "results"
FRAMES_PER_S = 50  # 20 ms envelope frames
# name -> (playback_speed, playback_overlap_speed, growth, max_chunk_s, past_context_s, crossfade_ms)
SCHEDULES = {
    "default": (2.0, 0.2, 2.0, 10.0, 0.3, 12.0),  # the server's defaults (past context 0.3 s since issue 17)
    "past_3s_before_17": (2.0, 0.2, 2.0, 10.0, 3.0, 12.0),  # the defaults before issue 17
    "past_1s": (2.0, 0.2, 2.0, 10.0, 1.0, 12.0),
    "low_latency": (0.5, 0.2, 2.0, 10.0, 0.3, 12.0),
    "fixed_1.5s_no_context": (1.5, 0.0, 1.0, 1.5, 0.0, 0.0),  # baseline: hard cuts, no context
}
BUCKETS = (64, 96, 128, 192, 256, 384, 512, 768, 1024)  # CODEC_BUCKETS' default
RATIO_SECONDS = (3, 5, 10, 20)


def envelope(audio: np.ndarray, frame: int) -> np.ndarray:
    """RMS per whole frame: audio [N] -> [N // frame]."""
    frames = audio[: len(audio) // frame * frame].astype(np.float64).reshape(-1, frame)
    return np.sqrt((frames**2).mean(axis=1))


def compare(stream: np.ndarray, oneshot: np.ndarray, sample_rate: int, floor_db: float) -> dict[str, float]:
    """Envelope difference (dB, 20 ms frames) and SNR of ``stream`` against ``oneshot``, both [N]."""
    frame = sample_rate // FRAMES_PER_S
    env_s, env_o = envelope(stream, frame), envelope(oneshot, frame)
    keep = env_o > max(env_o.max() * 10 ** (-floor_db / 20), 1e-9)
    diff = np.abs(20 * np.log10(np.maximum(env_s[keep], 1e-12) / env_o[keep]))
    worst = int(np.flatnonzero(keep)[np.argmax(diff)])
    err = np.sum((stream.astype(np.float64) - oneshot) ** 2)
    snr = 10 * np.log10(np.sum(oneshot.astype(np.float64) ** 2) / err) if err > 0 else float("inf")
    return {
        "env_median_db": float(np.median(diff)),
        "env_worst_db": float(diff.max()),
        "worst_at_s": worst / FRAMES_PER_S,
        "frames": int(keep.sum()),
        "snr_db": float(snr),
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


def decode_ratios(
    args: tuple[float, ...], tokens_per_s: int, sample_rate: int
) -> dict[str, dict[str, float]]:
    """Codes decoded per code emitted for utterances of RATIO_SECONDS, natural and bucketed windows."""
    ratios = {}
    for kind, buckets in (("natural", ()), ("buckets", BUCKETS)):
        schedule = StitchSchedule.from_seconds(*args, tokens_per_s, sample_rate, buckets=buckets)
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
    return {
        "schedule": {
            **schedule.__dict__,
            "crossfade_left": schedule.crossfade_left,
            "crossfade_right": schedule.crossfade_right,
        },
        "first_audio_after_codes": schedule.first_tokens + schedule.future_tokens,
        "env_median_db": float(np.median([r["env_median_db"] for r in rows])),
        "env_worst_db": float(max(r["env_worst_db"] for r in rows)),
        "snr_db_min": float(min(r["snr_db"] for r in rows)),
        "snr_db_median": float(np.median([r["snr_db"] for r in rows])),
        "decode_overhead": float(np.mean([r["decode_overhead"] for r in rows])),
        "utterances": rows,
    }


def run(
    decoder: NeuCodecDecoder, device: torch.device, n_utt: int, seed: int, floor_db: float
) -> dict[str, dict]:
    """All schedules over the same ``n_utt`` random utterances of 3-12 s."""
    config = decoder.config
    tokens_per_s = config.sample_rate // config.hop_length

    def decode_one(window: list[int]) -> np.ndarray:
        codes = torch.tensor([window], dtype=torch.long, device=device)
        return decoder.decode(codes)[0].float().cpu().numpy()

    rng = np.random.default_rng(seed)
    seconds = rng.uniform(3.0, 12.0, n_utt)
    utterances = [rng.integers(0, config.codebook_size, round(s * tokens_per_s)).tolist() for s in seconds]
    oneshots = [decode_one(codes) for codes in utterances]
    results: dict[str, dict] = {}
    for name, args in SCHEDULES.items():
        schedule = StitchSchedule.from_seconds(*args, tokens_per_s, config.sample_rate)
        rows = []
        for codes, oneshot in zip(utterances, oneshots, strict=True):
            audio, decoded = asyncio.run(stream_decode(decode_one, schedule, codes))
            assert audio.shape == oneshot.shape
            row = {"seconds": len(codes) / tokens_per_s, "windows": len(schedule.windows(len(codes)))}
            row |= compare(audio, oneshot, config.sample_rate, floor_db)
            row["decode_overhead"] = decoded / len(codes)
            rows.append(row)
        results[name] = summary(schedule, rows)
        results[name]["decoded_per_emitted"] = decode_ratios(args, tokens_per_s, config.sample_rate)
    return results


def table(results: dict[str, dict]) -> str:
    """A short text summary: one line per schedule."""
    head = "".join(
        f"{title:{align}{width}}"
        for title, align, width in [
            ("schedule", "<", 24),
            ("1st audio", ">", 10),
            ("env med dB", ">", 12),
            ("env worst dB", ">", 14),
            ("SNR min/med dB", ">", 18),
            ("decoded/code", ">", 14),
            ("3/5/10/20 s natural | buckets", ">", 34),
        ]
    )
    lines = [head, "-" * len(head)]
    for name, r in results.items():
        snr = f"{r['snr_db_min']:.1f}/{r['snr_db_median']:.1f}"
        ratios = " | ".join(
            "/".join(f"{v:.2f}" for v in r["decoded_per_emitted"][kind].values())
            for kind in ("natural", "buckets")
        )
        lines.append(
            f"{name:<24}{r['first_audio_after_codes']:>10}{r['env_median_db']:>12.4f}"
            f"{r['env_worst_db']:>14.4f}{snr:>18}{r['decode_overhead']:>14.2f}{ratios:>34}"
        )
    return "\n".join(lines)


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
    parser.add_argument("--utterances", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--floor-db", type=float, default=40.0, help="frames this far below the loudest are skipped"
    )
    parser.add_argument("--out", help="file name for the JSON under bench/results/")
    args = parser.parse_args(argv)

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
    results = run(decoder, device, args.utterances, args.seed, args.floor_db)
    report = {
        "bench": "stitch",
        "decoder": kind,
        "codec_config": decoder.config.to_dict(),
        "device": str(device),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "utterances": args.utterances,
        "seed": args.seed,
        "floor_db": args.floor_db,
        "elapsed_s": round(time.perf_counter() - started, 2),
        "schedules": results,
    }
    text = json.dumps(report, indent=2)
    print(text)
    print(table(results), file=sys.stderr)
    if args.out:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        path = RESULTS_DIR / Path(args.out).name
        path.write_text(text + "\n", encoding="utf-8")
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
