"""MOSS-TTS-Realtime's LM on full-size random weights: per-frame latency split, engine throughput at 1, 4
and 8 concurrent requests, time to first frame, and sdpa against eager attention.

    python -m bench.moss_lm_bench [--device cpu] [--dtype auto] [--frames 8]
        [--concurrency 1,4,8] [--model-dir DIR] [--tiny] [--out moss_lm_cpu.json]

(``make bench-moss-lm`` runs it on cpu and saves ``bench/results/moss_lm_cpu.json``.)

The model is built in memory from the fixtures' seeded random weights at the released sizes (Qwen3-1.7B
backbone, 4-layer local transformer: 2.0 G parameters, ~8 GB of float32 RAM; no file) unless
``--model-dir`` names a checkpoint; ``--tiny`` uses the test checkpoint's sizes (a smoke run). The prompt
is the system block with a ``--reference-frames`` voice reference plus a two-sentence text. The fixtures'
tokenizer spells text byte by byte (the system prompt alone is ~390 rows, against ~60 Qwen tokens), so
each prefill is cut from the front to ``--prefill-rows`` (default 110: about what the real tokenizer
makes of this prompt with a 2 s reference), keeping the voice rows, the assistant prefix and the text.

- ``split``: N streams stepping together, driven directly (no engine; N = 1 is the per-frame latency):
  each step's backbone forward (one row per stream), its 16 local forwards and its 16 batched samplings,
  timed apart; medians over ``--frames`` frames after the prefill (the first frame excluded). The
  batching ceiling, free of the engine's scheduling and of prefills.
- ``engine``: N requests of ``--frames`` frames each submitted together to ``MossFrameEngine``
  (``max_batch`` = the largest N): aggregate frames per wall second, and each request's time to its
  first frame, with the engine's prefill policy (requests admitted together prefilled together);
  ``engine_one_at_a_time``: the same with ``prefill_rows=1`` (one prompt after another, the former
  policy), in the same run as the baseline (``--no-baseline`` skips it).
- ``attention``: the backbone step and a frame's local forwards with sdpa and with eager, same weights.

Real-time needs 12.5 frames per second per stream (80 ms of audio per frame). Prints JSON on stdout and
a table on stderr; ``--out`` writes the JSON to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from app.core.device import resolve_device, synchronize
from app.families.moss.fixtures.lm import PAD_TOKEN, SPECIAL_TOKENS, TINY_MOSS_TTS_CONFIG, random_moss_lm
from app.families.moss.lm.config import official_config
from app.families.moss.lm.engine import MossFrameEngine
from app.families.moss.lm.loader import LoadedMoss, choose_attention, choose_dtype, load_moss_lm, special_ids
from app.families.moss.lm.model import MossTTSRealtime
from app.families.moss.lm.prompt import MossPrompter
from app.families.moss.lm.sampling import choose_codes, row_sampling
from app.families.moss.lm.types import FrameJob, FrameSampling
from app.families.neucodec.fixtures.lm import write_byte_tokenizer
from app.lm.sampling import BatchSampling
from bench.moss_codec_bench import cpu_model
from bench.saving import save_report

TEXT = (
    "Welcome to the world of MOSS TTS Realtime. Experience how text transforms into smooth, human-like "
    "speech in real time."
)
FRAMES_PER_SECOND = 12.5


def build(args: argparse.Namespace) -> LoadedMoss:
    """The model (random full-size, tiny, or ``--model-dir``) with the fixtures' tokenizer."""
    if args.model_dir:
        return load_moss_lm(args.model_dir, device=args.device, dtype=args.dtype, attention=args.attention)
    from transformers import AutoTokenizer

    device = resolve_device(args.device)
    dtype = choose_dtype(args.dtype, device)
    config = TINY_MOSS_TTS_CONFIG if args.tiny else official_config()
    started = time.perf_counter()
    model: MossTTSRealtime = random_moss_lm(config, seed=0).to(device=device, dtype=dtype)
    print(f"built the model in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    attention = choose_attention(args.attention, device)
    set_attention(model, attention)
    with tempfile.TemporaryDirectory() as tmp:
        write_byte_tokenizer(Path(tmp), SPECIAL_TOKENS, [], eos="<|im_end|>", pad=PAD_TOKEN)
        tokenizer = AutoTokenizer.from_pretrained(tmp)
    return LoadedMoss(
        model, tokenizer, special_ids(tokenizer, config), device, dtype, config.max_positions, attention
    )


def set_attention(model: MossTTSRealtime, attention: str) -> None:
    """Switch both transformers' backbone and our local transformer to ``attention`` (sdpa | eager)."""
    model.language_model.config._attn_implementation = attention
    model.local_transformer.attention = attention


def job(loaded: LoadedMoss, args: argparse.Namespace, seed: int) -> FrameJob:
    """The bench request; its prefill cut from the front to ``--prefill-rows`` (see the module doc)."""
    prompter = MossPrompter(loaded.tokenizer, loaded.ids)
    reference = np.random.default_rng(seed).integers(0, 1024, size=(args.reference_frames, 16))
    full = prompter.job(TEXT, reference=reference, max_frames=args.frames, sampling=FrameSampling(seed=seed))
    if args.prefill_rows and len(full.prefill) > args.prefill_rows:
        return replace(full, prefill=full.prefill[-args.prefill_rows :])
    return full


def split(loaded: LoadedMoss, args: argparse.Namespace, streams: int = 1) -> dict[str, Any]:
    """``streams`` rows stepping together, driven directly (no engine): per-step backbone / local /
    sampling times (ms, medians over the frames after the first) and the frames per second that makes."""
    model, device = loaded.model, loaded.device
    local = model.local_transformer
    jobs = [job(loaded, args, seed=1 + i) for i in range(streams)]  # same length: no padding needed
    params = BatchSampling.of([row_sampling(j.sampling) for j in jobs], device)
    window = jobs[0].sampling.repetition_window
    history = torch.zeros((streams, args.frames, 16), dtype=torch.long, device=device)
    cache = local.new_cache(streams)
    times: dict[str, list[float]] = {"backbone_ms": [], "local_ms": [], "sampling_ms": []}
    tail = jobs[0].text_tail
    with torch.inference_mode():
        rows = torch.from_numpy(np.stack([j.prefill for j in jobs])).to(device)
        started = time.perf_counter()
        hidden, kv = model.backbone(rows, None)
        synchronize(device)
        prefill_ms = (time.perf_counter() - started) * 1e3
        for frame in range(args.frames):
            started = time.perf_counter()
            if frame:
                text = tail[frame - 1] if frame - 1 < len(tail) else loaded.ids.text_pad
                texts = torch.full((streams, 1), text, dtype=torch.long, device=device)
                step = torch.cat([texts, history[:, frame - 1]], dim=1)[:, None]
                hidden, kv = model.backbone(step, kv)
                synchronize(device)
            times["backbone_ms"].append((time.perf_counter() - started) * 1e3)
            local_s = sampling_s = 0.0
            x = hidden
            for head in range(16):
                started = time.perf_counter()
                if head:
                    x = local.embed(head, history[:, frame, head - 1])
                logits = local.step(head, x, cache)
                synchronize(device)
                middle = time.perf_counter()
                recent = history[:, max(0, frame - window) : frame, head]
                frames = torch.full((streams,), frame, dtype=torch.long, device=device)
                history[:, frame, head], _ = choose_codes(logits, head, recent, params, frames)
                local_s += middle - started
                sampling_s += time.perf_counter() - middle
            times["local_ms"].append(local_s * 1e3)
            times["sampling_ms"].append(sampling_s * 1e3)
    medians = {key: statistics.median(values[1:]) for key, values in times.items()}
    medians["step_ms"] = sum(medians.values())
    return {
        "streams": streams,
        "prefill_rows": int(rows.shape[1]),
        "prefill_ms": prefill_ms,
        **medians,
        "frames_per_s": streams * 1e3 / medians["step_ms"],
    }


async def engine_run(
    loaded: LoadedMoss, args: argparse.Namespace, streams: int, max_batch: int, prefill_rows: int
) -> dict[str, Any]:
    """``streams`` requests at once through the engine: frames/s together, first-frame times."""
    engine = MossFrameEngine(loaded, max_batch=max_batch, prefill_rows=prefill_rows)
    engine.start()
    jobs = [job(loaded, args, seed=10 + i) for i in range(streams)]
    started = time.perf_counter()

    async def one(the_job: FrameJob) -> tuple[float, int]:
        first, count = 0.0, 0
        async for frames in engine.stream(the_job):
            if not count:
                first = time.perf_counter() - started
            count += len(frames)
        return first, count

    try:
        results = await asyncio.gather(*(one(j) for j in jobs))
    finally:
        await engine.close()
    wall = time.perf_counter() - started
    frames = sum(count for _, count in results)
    firsts = [first * 1e3 for first, _ in results]
    return {
        "streams": streams,
        "frames": frames,
        "wall_s": wall,
        "frames_per_s": frames / wall,
        "rtf_per_stream": (wall / (frames / streams)) * FRAMES_PER_SECOND,
        "first_frame_ms_median": statistics.median(firsts),
        "first_frame_ms_max": max(firsts),
        "peak_rows": engine.peak_rows,
        "peak_prefill_group": engine.peak_group,
        "steps": engine.steps,
    }


def attention_compare(loaded: LoadedMoss, args: argparse.Namespace) -> dict[str, Any]:
    """Backbone step and one frame's 16 local forwards with sdpa and with eager (ms, medians)."""
    model, device = loaded.model, loaded.device
    local = model.local_transformer
    rows = torch.from_numpy(job(loaded, args, seed=2).prefill).to(device)[None]
    step = torch.full((1, 1, 17), 1024, dtype=torch.long, device=device)
    step[0, 0, 0] = loaded.ids.text_pad
    out: dict[str, Any] = {}
    original = loaded.attention
    with torch.inference_mode():
        for attention in ("sdpa", "eager"):
            set_attention(model, attention)
            hidden, kv = model.backbone(rows, None)
            backbone, local_ms, logits = [], [], []
            for _ in range(args.repeats):
                started = time.perf_counter()
                model.backbone(step, kv)
                kv.crop(-1)  # drop the step's row again
                synchronize(device)
                backbone.append((time.perf_counter() - started) * 1e3)
                cache = local.new_cache(1)
                started = time.perf_counter()
                x = hidden
                frame_logits = []
                for head in range(16):
                    if head:
                        x = local.embed(head, torch.zeros(1, dtype=torch.long, device=device))
                    frame_logits.append(local.step(head, x, cache))
                synchronize(device)
                local_ms.append((time.perf_counter() - started) * 1e3)
                logits = frame_logits
            out[attention] = {
                "backbone_step_ms": statistics.median(backbone),
                "local_frame_ms": statistics.median(local_ms),
                "logits": torch.stack(logits).float(),
            }
    set_attention(model, original)
    diff = (out["sdpa"].pop("logits") - out["eager"].pop("logits")).abs().max().item()
    out["max_abs_logit_diff"] = diff
    return out


def moss_parser(doc: str | None, frames: int, concurrency: str) -> argparse.ArgumentParser:
    """The options both MOSS benches take (device, precision, load, prompt cut, output)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--attention", default="auto")
    parser.add_argument("--frames", type=int, default=frames, help="frames per request (80 ms each)")
    parser.add_argument("--concurrency", default=concurrency)
    parser.add_argument(
        "--prefill-rows",
        type=int,
        default=110,
        help="cut each prompt to its last N rows (0: all; the byte tokenizer makes ~4x the rows)",
    )
    parser.add_argument("--tiny", action="store_true", help="the test checkpoints' sizes (smoke run)")
    parser.add_argument("--out", default="")
    return parser


def machine(loaded: LoadedMoss) -> dict[str, Any]:
    """The head of both MOSS benches' reports: where and how the LM ran."""
    return {
        "cpu": cpu_model(),
        "torch_threads": torch.get_num_threads(),
        "cores": os.cpu_count(),
        "device": str(loaded.device),
    }


def main(argv: list[str] | None = None) -> None:
    parser = moss_parser(__doc__, frames=16, concurrency="1,4,8")
    parser.add_argument("--reference-frames", type=int, default=25)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model-dir", default="")
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip the one-prefill-at-a-time engine runs"
    )
    args = parser.parse_args(argv)
    loaded = build(args)
    counts = [int(c) for c in args.concurrency.split(",")]
    report: dict[str, Any] = machine(loaded) | {
        "dtype": str(loaded.dtype).removeprefix("torch."),
        "attention": loaded.attention,
        "size": "tiny" if args.tiny else ("checkpoint" if args.model_dir else "full (random)"),
        "frames_per_request": args.frames,
    }
    report["split"] = [split(loaded, args, n) for n in counts]
    widest = max(counts)
    report["engine"] = [asyncio.run(engine_run(loaded, args, n, widest, widest)) for n in counts]
    if not args.no_baseline:
        report["engine_one_at_a_time"] = [asyncio.run(engine_run(loaded, args, n, widest, 1)) for n in counts]
    report["attention_compare"] = attention_compare(loaded, args)
    print(json.dumps(report, indent=2))
    print(
        f"\n{report['cpu']}, {report['torch_threads']} threads, {report['dtype']}, {report['attention']}, "
        f"{report['size']}; real time needs 12.5 frames/s per stream",
        file=sys.stderr,
    )
    for s in report["split"]:
        print(
            f"lockstep {s['streams']}: prefill {s['prefill_rows']} rows x {s['streams']}: "
            f"{s['prefill_ms']:.0f} ms;"
            f" step: backbone {s['backbone_ms']:.1f} + local {s['local_ms']:.1f} + sampling "
            f"{s['sampling_ms']:.1f} = {s['step_ms']:.1f} ms -> {s['frames_per_s']:.2f} frames/s",
            file=sys.stderr,
        )
    for policy in ("engine", "engine_one_at_a_time"):
        for run in report.get(policy, []):
            print(
                f"{policy} {run['streams']} streams: {run['frames_per_s']:.2f} frames/s together, "
                f"RTF per stream {run['rtf_per_stream']:.1f}, "
                f"first frame median {run['first_frame_ms_median']:.0f} ms "
                f"(max {run['first_frame_ms_max']:.0f}), peak rows {run['peak_rows']}",
                file=sys.stderr,
            )
    a = report["attention_compare"]
    print(
        f"attention: sdpa backbone {a['sdpa']['backbone_step_ms']:.1f} ms / "
        f"local {a['sdpa']['local_frame_ms']:.1f} ms;"
        f" eager {a['eager']['backbone_step_ms']:.1f} / {a['eager']['local_frame_ms']:.1f} ms;"
        f" max |logit diff| {a['max_abs_logit_diff']:.2e}",
        file=sys.stderr,
    )
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
