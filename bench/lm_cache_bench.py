"""Decode-step time of the in-process LM as its KV cache grows: transformers' ``DynamicLayer`` (a
``torch.cat`` of the whole cache per step) against our ``GrowingLayer`` (in place), in one run.

    .venv/bin/python -m bench.lm_cache_bench [--shape qwen3-1.7b|small]
        [--rows 8] [--lengths 200,800,1600] [--steps 4] [--dtype bfloat16] [--out lm_cache_cpu.json]

For each cache kind and length L: ``--rows`` sequences of L random prompt tokens are prefilled (in chunks
of 256) into a fresh cache, then ``--steps`` decode steps run over all rows; the median step is
reported, with the largest difference of the two kinds' last logits (they must agree). The model is
``bench.lm_batch_bench``'s random Qwen3 in the real shape, loaded once, with the engines' speech head.
Prints the JSON report on stdout and each length's line on stderr as it is measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import torch
from transformers.cache_utils import DynamicCache

from app.core.device import resolve_device
from app.lm.padded_cache import new_cache
from bench.lm_batch_bench import _cpu, build_model
from bench.saving import save_report

PREFILL_CHUNK = 256


def step_ms(lm: Any, cache: Any, rows: int, length: int, steps: int) -> tuple[float, torch.Tensor]:
    """Prefill ``rows`` x ``length`` tokens into ``cache``, then the median of ``steps`` decode steps (ms)
    and the last step's logits."""
    generator = torch.Generator().manual_seed(length)
    ids = torch.randint(300, 1000, (rows, length), generator=generator).to(lm.device)
    with torch.inference_mode():
        for start in range(0, length, PREFILL_CHUNK):
            logits, cache = lm.logits(input_ids=ids[:, start : start + PREFILL_CHUNK], past_key_values=cache)
        times = []
        for step in range(steps + 1):  # the first one warms up
            token = lm.allowed_ids[step * 7].view(1, 1).expand(rows, 1)
            started = time.perf_counter()
            logits, cache = lm.logits(input_ids=token, past_key_values=cache)
            times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times[1:]), logits


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", default="qwen3-1.7b", choices=["qwen3-1.7b", "small"])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--lengths", default="200,800,1600")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="bfloat16")
    parser.add_argument("--out", default="", help="also write the JSON to bench/results/OUT")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    lm = build_model(args.shape, {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype], device)
    runs = []
    for length in (int(n) for n in args.lengths.split(",")):
        dynamic, logits_dynamic = step_ms(lm, DynamicCache(), args.rows, length, args.steps)
        growing, logits_growing = step_ms(lm, new_cache(lm.model.config), args.rows, length, args.steps)
        runs.append(
            {
                "length": length,
                "dynamic_step_ms": round(dynamic, 1),
                "growing_step_ms": round(growing, 1),
                "speedup": round(dynamic / growing, 2),
                "max_abs_logit_diff": float((logits_dynamic - logits_growing).abs().max()),
            }
        )
        print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    report = {"cpu": _cpu(), "device": str(device), "dtype": args.dtype, "shape": args.shape}
    report |= {"rows": args.rows, "torch": torch.__version__, "torch_threads": torch.get_num_threads()}
    report["runs"] = runs
    print(json.dumps(report, indent=2))
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
