"""In-process LM throughput: the batched engine against the one-at-a-time engine, in one run.

    .venv/bin/python -m bench.lm_batch_bench [--shape qwen3-1.7b|small]
        [--concurrency 1,4,8] [--tokens 16] [--device cpu] [--dtype float32]
        [--engines one-at-a-time,batched,batched-serial-prefill] [--out lm_batch_cpu.json]

The LM is a random Qwen3 in the real model's shape (``--shape qwen3-1.7b``: Qwen3-1.7B's config, as
``python -m app.tools.precision`` builds it; speed does not depend on the weight values) with the fixture
tokenizer (bytes, the special tokens and the 65,536 speech tokens), built once in memory and shared by
both engines (``transformers_source.load_lm`` is replaced by one returning it). ``--shape small`` is a
4-layer, 1024-wide Qwen3 for a quick look.

At each concurrency level N, N requests (different prompts of about 40 tokens, seeded sampling at the
server's defaults) start together and each generates ``--tokens`` speech tokens (``max_tokens``; a stop
token ends one early). Aggregate tokens/s is every request's codes over the wall time from the first
submission to the last code; time to first token (TTFT) is per request, from submission to its first
code (queueing and prefill included). Steady tokens/s counts only the codes after the last request's
first code, over the time from then to the end: the decode rate once every prefill is done (for the
one-at-a-time engine, N > 1 requests are never all in, so it is the rate of the last one alone). One
warmup request per engine first.

The engines: ``one-at-a-time`` (``LM_MAX_BATCH=1``), ``batched`` (the default: up to the highest level's
rows decoded together, prompts admitted together prefilled as one group) and ``batched-serial-prefill``
(the same with ``LM_PREFILL_ROWS=1``: one prompt prefilled at a time).

Prints JSON on stdout and a table on stderr; ``--out`` also writes the JSON to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from app.core.device import resolve_device
from app.families.neucodec.fixtures.lm import (
    EOS_TOKEN,
    MAX_POSITIONS,
    PAD_TOKEN,
    SPECIAL_TOKENS,
    _write_tokenizer,
)
from app.families.neucodec.lm import transformers_source
from app.families.neucodec.lm.loading import LoadedLM
from app.families.neucodec.lm.transformers_source import TransformersTokenSource
from app.families.neucodec.lm.types import GenerationParams, TokenSource
from app.families.neucodec.precision.lm import QWEN3_1_7B
from app.families.neucodec.prompt import tts_prompt

SMALL: dict[str, Any] = QWEN3_1_7B | {
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 4,
}
SHAPES = {"qwen3-1.7b": QWEN3_1_7B, "small": SMALL}
TEXTS = [
    "Selamat pagi, hari ini cuaca sangat baik untuk berjalan di taman.",
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Please remember to bring your umbrella, it may rain this afternoon.",
    "Kami akan bertolak ke Kuala Lumpur selepas makan tengah hari nanti.",
    "Our meeting starts at nine, so let us prepare the slides tonight.",
    "Terima kasih kerana sudi datang ke majlis perkahwinan kami semalam.",
    "She sold seashells by the seashore while the sun was setting slowly.",
    "Jangan lupa untuk menutup tingkap sebelum keluar dari rumah ini.",
]


def build_model(shape: str, dtype: torch.dtype, device: torch.device) -> LoadedLM:
    """A random Qwen3 of ``shape`` with the fixture tokenizer, as ``load_lm`` would return it."""
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    directory = Path(tempfile.mkdtemp(prefix="lm_batch_bench_"))
    vocab = _write_tokenizer(directory)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    token_id = {token: 256 + i for i, token in enumerate(SPECIAL_TOKENS)}
    config = Qwen3Config(
        **(SHAPES[shape] | {"max_position_embeddings": MAX_POSITIONS}),
        bos_token_id=token_id[PAD_TOKEN],
        eos_token_id=token_id[EOS_TOKEN],
        pad_token_id=token_id[PAD_TOKEN],
    )
    assert vocab <= config.vocab_size
    torch.manual_seed(0)
    model = Qwen3ForCausalLM._from_config(config, dtype=dtype, attn_implementation="sdpa")
    speech = tokenizer.convert_tokens_to_ids([f"<|s_{code}|>" for code in range(65536)])
    allowed = torch.tensor([*speech, token_id[EOS_TOKEN]], dtype=torch.long)
    return LoadedLM.of(model.to(device).eval(), tokenizer, device, allowed)


async def one_request(source: TokenSource, params: GenerationParams, t0: float) -> list[tuple[float, int]]:
    """Run one generation; each delta as (seconds since ``t0``, codes)."""
    deltas = []
    async for delta in source.generate(params):
        deltas.append((time.perf_counter() - t0, len(delta)))
    return deltas


async def level(source: TokenSource, n: int, tokens: int) -> dict[str, Any]:
    """N requests at once: aggregate tokens/s, steady tokens/s (once every request has its first code:
    decode without prefills or queueing) and TTFT (median, max)."""
    requests = [
        GenerationParams(
            prompt=tts_prompt("husein", TEXTS[i % len(TEXTS)]),
            model="bench",
            max_tokens=tokens,
            temperature=0.6,
            repetition_penalty=1.15,
            seed=i,
        )
        for i in range(n)
    ]
    t0 = time.perf_counter()
    results = await asyncio.gather(*(one_request(source, p, t0) for p in requests))
    wall = time.perf_counter() - t0
    codes = sum(count for deltas in results for _, count in deltas)
    ttft = [deltas[0][0] for deltas in results]
    all_in = max(ttft)
    steady = sum(count for deltas in results for at, count in deltas if at > all_in)
    return {
        "requests": n,
        "codes": codes,
        "wall_s": round(wall, 3),
        "tokens_per_s": round(codes / wall, 3),
        "steady_tokens_per_s": round(steady / (wall - all_in), 3) if steady else None,
        "ttft_median_s": round(statistics.median(ttft), 3),
        "ttft_max_s": round(max(ttft), 3),
    }


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    started = time.perf_counter()
    device = resolve_device(args.device)
    loaded = build_model(args.shape, dtype, device)
    build_s = time.perf_counter() - started
    transformers_source.load_lm = lambda *_args, **_kwargs: loaded  # type: ignore[assignment]  # share one model
    levels = [int(n) for n in args.concurrency.split(",")]
    most = max(levels)
    every: dict[str, TokenSource] = {
        "one-at-a-time": TransformersTokenSource("bench", args.device, name="single"),
        "batched": TransformersTokenSource("bench", args.device, name="batched", batch_size=most),
        "batched-serial-prefill": TransformersTokenSource(
            "bench", args.device, name="serial-prefill", batch_size=most, prefill_rows=1
        ),
    }
    engines = {name: every[name] for name in args.engines.split(",")}
    rows: dict[str, list[dict[str, Any]]] = {}
    for name, source in engines.items():
        await source.start()
        try:
            await level(source, 1, 2)  # warmup
            rows[name] = []
            for n in levels:
                row = await level(source, n, args.tokens)
                rows[name].append(row)
                print(f"{name:>14} N={n}: {row}", file=sys.stderr, flush=True)
        finally:
            await source.close()
    one = None  # one request alone on the one-at-a-time engine
    if levels[0] == 1 and "one-at-a-time" in rows:
        one = rows["one-at-a-time"][0]
    return {
        "cpu": _cpu(),
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "shape": args.shape,
        "parameters_m": round(sum(p.numel() for p in loaded.model.parameters()) / 1e6, 1),
        "dtype": args.dtype,
        "tokens_per_request": args.tokens,
        "model_build_s": round(build_s, 1),
        "engines": rows,
        # aggregate (and steady) tokens/s of each batched engine at N over one request's alone
        "vs_one_request": {
            name: {
                str(row["requests"]): {
                    "aggregate": round(row["tokens_per_s"] / one["tokens_per_s"], 2),
                    "steady": round((row["steady_tokens_per_s"] or 0) / one["steady_tokens_per_s"], 2),
                }
                for row in engine_rows
            }
            for name, engine_rows in rows.items()
            if name != "one-at-a-time"
        }
        if one and one["steady_tokens_per_s"]
        else None,
    }


def _cpu() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    names = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")]
    return names[0] if names else platform.processor()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-1.7b")
    parser.add_argument("--concurrency", default="1,4,8")
    parser.add_argument("--tokens", type=int, default=16, help="speech tokens per request")
    parser.add_argument("--device", default="cpu", help="cpu, cuda[:N] (the GPU run of the same bench)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    parser.add_argument(
        "--engines",
        default="one-at-a-time,batched,batched-serial-prefill",
        help="comma-separated, run in this order (the ratios need one-at-a-time and N=1 first)",
    )
    parser.add_argument("--out", default="", help="also write the JSON to bench/results/OUT")
    args = parser.parse_args(argv)
    result = asyncio.run(bench(args))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        (Path(__file__).parent / "results" / args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
