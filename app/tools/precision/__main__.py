"""``python -m app.tools.precision PART --source SRC --ref CONFIG|RUN --test CONFIG|RUN ...``

Runs PART's fixed inputs on the reference and on each test configuration (``DEVICE,DTYPE[,ATTENTION]``,
e.g. ``cpu,float32`` or ``npu:0,bfloat16,sdpa_fp32``) and compares every test with the reference.
A RUN is a file saved with ``--save-dir`` (here or on another machine): its tensors are used as they
are and its inputs drive the configurations that do run. Prints tables (or JSON with ``--json -``);
exit status 0 when every limit holds, 1 when one breaks, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.core.device import resolve_device
from app.families.shared.run_config import RunConfig
from app.tools.precision.compare import NextTokenOptions, Thresholds, compare_runs
from app.tools.precision.parts import PARTS, get_part
from app.tools.precision.report import to_json, to_text
from app.tools.precision.runs import Run, environment, load_run, save_run

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m app.tools.precision",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="parts:\n"
        + "\n".join(f"  {name}: {part.description}" for name, part in sorted(PARTS.items())),
    )
    parser.add_argument("part", choices=sorted(PARTS), help="the model part to run")
    parser.add_argument(
        "--source",
        help="checkpoint directory or Hugging Face id, or random weights (each part's below); "
        "default: the source of a RUN given",
    )
    parser.add_argument(
        "--ref", default="cpu,float32,sdpa", help="reference CONFIG or RUN file (default cpu,float32,sdpa)"
    )
    parser.add_argument("--test", action="append", default=[], help="a CONFIG or RUN to compare (repeatable)")
    parser.add_argument(
        "--length",
        type=int,
        help="continuation tokens (LM) or frames of codes and audio (codec); default: "
        + ", ".join(f"{name} {part.default_length}" for name, part in sorted(PARTS.items())),
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the fixed inputs")
    parser.add_argument("--save-dir", type=Path, help="save every run made here as PART-LABEL.safetensors")
    parser.add_argument(
        "--json", help="write the JSON report to this file ('-': stdout, instead of the tables)"
    )
    parser.add_argument("--topk", type=int, default=5, help="k of the top-k overlap (LM)")
    parser.add_argument(
        "--temperature", type=float, default=1.0, help="softmax temperature of KL and TV (LM)"
    )
    parser.add_argument(
        "--tv-threshold", type=float, default=0.05, help="TV distance that counts a position as differing"
    )
    limits = parser.add_argument_group("limits (exit 1 when one breaks; unchecked when unset)")
    limits.add_argument("--min-cosine", type=float, help="every tensor's cosine similarity")
    limits.add_argument("--max-rel-l2", type=float, help="every tensor's relative L2 error (0.0133 = 1.33%%)")
    limits.add_argument("--min-top1", type=float, help="LM: share of positions with the same top-1 token")
    limits.add_argument("--min-topk-overlap", type=float, help="LM: mean top-k overlap")
    limits.add_argument("--max-kl-mean", type=float, help="LM: mean KL(ref || test) in nats")
    limits.add_argument(
        "--max-share-tv", type=float, help="LM: share of positions with TV above --tv-threshold"
    )
    limits.add_argument("--min-audio-snr-db", type=float, help="codec: waveform SNR")
    limits.add_argument("--max-log-mel-db", type=float, help="codec: log-mel distance")
    limits.add_argument(
        "--min-code-agreement", type=float, help="codec encoder: mean share of identical codes per codebook"
    )
    return parser


def _is_run_file(text: str) -> bool:
    return text.endswith(".safetensors") or Path(text).is_file()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _main(args)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _main(args: argparse.Namespace) -> int:
    part = get_part(args.part)
    specs = [args.ref, *args.test]
    loaded = {spec: load_run(Path(spec)) for spec in specs if _is_run_file(spec)}
    for spec, run in loaded.items():
        if run.part != part.name:
            raise ValueError(f"{spec} is a run of {run.part}, not {part.name}")
    first = next(iter(loaded.values()), None)
    source = args.source or (first.source if first else None)
    if source is None:
        raise ValueError("--source is needed when no RUN file is given")
    for spec, run in loaded.items():
        if run.source != source:  # a path on another machine may name the same checkpoint
            print(f"note: {spec} was made from {run.source}; runs here use {source}", file=sys.stderr)
    if first is not None:
        inputs, options = first.inputs, first.options
    else:
        length = part.default_length if args.length is None else args.length
        if length < 1:
            raise ValueError(f"--length must be at least 1, got {length}")
        inputs, options = part.make_inputs(source, args.seed, length)
    runs: list[Run] = []
    for spec in specs:
        if spec in loaded:
            runs.append(loaded[spec])
            continue
        config = RunConfig.parse(spec)
        print(f"running {part.name} on {config.label} ...", file=sys.stderr)
        outputs = part.run(source, config, inputs, options)
        run = Run(
            part.name, source, config, inputs, outputs, options, environment(resolve_device(config.device))
        )
        if args.save_dir is not None:
            path = save_run(run, args.save_dir / f"{part.name}-{config.label}.safetensors")
            print(f"saved {path}", file=sys.stderr)
        runs.append(run)
    reference, tests = runs[0], runs[1:]
    limits = Thresholds(
        args.min_cosine, args.max_rel_l2, args.min_top1, args.min_topk_overlap,
        args.max_kl_mean, args.max_share_tv, args.min_audio_snr_db, args.max_log_mel_db,
        args.min_code_agreement,
    )  # fmt: skip
    token_options = NextTokenOptions(args.topk, args.temperature, args.tv_threshold)
    comparisons = [compare_runs(reference, test, part.kind, limits, token_options) for test in tests]
    report = to_json(reference, comparisons, limits)
    if args.json == "-":
        print(json.dumps(report, indent=1))
    else:
        print(to_text(reference, comparisons))
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return EXIT_PASS if report["passed"] else EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
