"""What MOSS_PREPACK buys on a CPU: the MOSS LM's step and the MOSS codec decoder's step, plain against
the same weights prepacked (``app.codec.prepack``), in one run.

    python -m bench.moss_prepack_bench [--model-dir DIR] [--codec-dir DIR] [--dtype auto] [--codec-dtype auto]
        [--concurrency 1,4] [--frames 8] [--repeats 5] [--parts lm,codec] [--tiny] [--out F.json]

- ``lm``: ``bench.moss_lm_bench``'s split (N streams stepping together, driven directly: the backbone
  step after a ``--prefill-rows`` prefill and the 16 local forwards of a frame, medians over ``--frames``
  frames after the first), first on the plain model, then on the same model prepacked in place (one copy
  of the weights in memory). Exactness: the first frame's 16 codebooks of logits (greedy codes fed back)
  of both.
- ``codec``: the decoder (dtype as ``MOSS_CODEC_DTYPE``: bf16 on a CPU with AMX or AVX-512-BF16) in
  decode steps: a fresh stream's first frame, one stream's 3-frame step after a 3-frame warm step, and
  8 streams' 3-frame steps in one call (medians of ``--repeats``), plain then prepacked in place.
  Exactness: the audio of the same steps from both.

The models are built in memory from the fixtures' seeded random weights at the released sizes unless
``--model-dir`` / ``--codec-dir`` name checkpoints (``python -m app.tools.fixtures --moss-tts-full-size
--full-size-moss-codec`` writes both). The plain run goes first: on a shared machine, compare the two
columns of one run rather than runs. Prints JSON on stdout and a table on stderr; ``--out`` writes the
JSON to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

import torch

from app.codec.precision import cpu_flags
from app.codec.prepack import prepack_for_cpu
from app.core.device import resolve_device
from app.families.moss.codec.config import MossCodecConfig
from app.families.moss.codec.loading import load_codec
from app.families.moss.codec.model import MossAudioCodec
from app.families.moss.family import codec_precision
from app.families.moss.fixtures.codec import TINY_MOSS_CONFIG, random_codec
from app.families.moss.lm.loader import LoadedMoss
from app.families.moss.lm.types import CODEBOOKS
from app.families.moss.settings import MossSettings
from app.tools.precision.metrics import compare_tensors
from bench.moss_codec_bench import cpu_model
from bench.moss_lm_bench import build, job, moss_parser, split
from bench.saving import save_report

CODEC_CASES = {"first_frame_1x1": (1, 1, False), "step_1x3": (1, 3, True), "step_8x3": (8, 3, True)}
"""name -> (streams, frames per stream, after a warm step of 3 frames)."""


def first_frame_logits(loaded: LoadedMoss, args: argparse.Namespace) -> torch.Tensor:
    """The 16 codebooks' logits ``[16, 1, 1027]`` of the first frame of one stream, greedy codes fed back."""
    model = loaded.model
    local = model.local_transformer
    rows = torch.from_numpy(job(loaded, args, seed=1).prefill[None]).to(loaded.device)
    with torch.inference_mode():
        x, _ = model.backbone(rows, None)
        cache = local.new_cache(1)
        logits = []
        for head in range(CODEBOOKS):
            if head:
                x = local.embed(head, logits[-1].argmax(-1).clamp(max=1023))
            logits.append(local.step(head, x, cache).float())
    return torch.stack(logits)


def lm_part(args: argparse.Namespace) -> dict[str, Any]:
    """The split of each concurrency, plain then prepacked, and the first frame's logits error."""
    loaded = build(args)
    counts = [int(c) for c in args.concurrency.split(",")]
    plain = [split(loaded, args, n) for n in counts]
    want = first_frame_logits(loaded, args)
    report = prepack_for_cpu(loaded.model, "MOSS LM")
    packed = [split(loaded, args, n) for n in counts]
    got = first_frame_logits(loaded, args)
    rows = []
    for before, after in zip(plain, packed, strict=True):
        row: dict[str, Any] = {"streams": before["streams"]}
        for key in ("backbone_ms", "local_ms", "step_ms"):
            row[f"plain_{key}"], row[f"prepacked_{key}"] = round(before[key], 1), round(after[key], 1)
        row["step_speedup"] = round(before["step_ms"] / after["step_ms"], 2)
        rows.append(row)
    return {
        "dtype": str(loaded.dtype).removeprefix("torch."),
        "layers_prepacked": report.packed,
        "layers_plain": len(report.plain),
        "first_frame_logits_relative_error": compare_tensors(want, got).rel_l2,
        "first_frame_codes_equal": bool(torch.equal(got.argmax(-1), want.argmax(-1))),
        "results": rows,
    }


def build_codec(args: argparse.Namespace, device: torch.device) -> tuple[MossAudioCodec, str]:
    """The decoder only, in the dtype MOSS_CODEC_DTYPE (``--codec-dtype``) gives on this device."""
    settings = MossSettings(_env_file=None, MOSS_CODEC_DTYPE=args.codec_dtype)  # type: ignore[call-arg]
    dtype = getattr(torch, codec_precision(settings, device.type)[0].dtype)
    if args.codec_dir:
        return load_codec(
            args.codec_dir, device, with_encoder=False, dtype=dtype
        ), f"checkpoint {args.codec_dir}"
    config = TINY_MOSS_CONFIG if args.tiny else MossCodecConfig.official()
    codec = random_codec(config, seed=0, with_encoder=False).to(device)
    codec.decoder.to(dtype)
    return codec, "tiny random" if args.tiny else "official-size random (seed 0)"


def codec_steps(codec: MossAudioCodec, repeats: int) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
    """Median ms of each case's decode step, and its first run's audio."""
    generator = torch.Generator().manual_seed(0)

    def chunk(frames: int) -> torch.Tensor:
        return torch.randint(0, 1024, (frames, CODEBOOKS), generator=generator).to(codec.device)

    warm = [chunk(3) for _ in range(8)]
    times: dict[str, float] = {}
    audio: dict[str, torch.Tensor] = {}
    for name, (streams, frames, warmed) in CODEC_CASES.items():
        chunks = [chunk(frames) for _ in range(streams)]
        runs = []
        for repeat in range(repeats + 1):  # the first run warms up
            states = [codec.new_state() for _ in range(streams)]
            if warmed:
                codec.decode_step(warm[:streams], states)
            started = time.perf_counter()
            out = codec.decode_step(chunks, states)
            runs.append((time.perf_counter() - started) * 1e3)
            if not repeat:
                audio[name] = torch.cat(out)
            for state in states:
                state.release()
        times[name] = statistics.median(runs[1:])
    return times, audio


def codec_part(args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """Each decode case plain, then with the decoder prepacked, and the audio's difference."""
    codec, kind = build_codec(args, device)
    plain_ms, want = codec_steps(codec, args.repeats)
    report = prepack_for_cpu(codec.decoder, "MOSS codec decoder")
    packed_ms, got = codec_steps(codec, args.repeats)
    rows = [
        {
            "case": name,
            "plain_ms": round(plain_ms[name], 1),
            "prepacked_ms": round(packed_ms[name], 1),
            "speedup": round(plain_ms[name] / packed_ms[name], 2),
            "audio_relative_error": compare_tensors(want[name], got[name]).rel_l2,
        }
        for name in CODEC_CASES
    ]
    return {
        "codec": kind,
        "dtype": str(codec.decoder_dtype).removeprefix("torch."),
        "layers_prepacked": report.packed,
        "layers_plain": len(report.plain),
        "results": rows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = moss_parser(__doc__, frames=8, concurrency="1,4")
    parser.add_argument("--reference-frames", type=int, default=25)
    parser.add_argument("--model-dir", default="")
    parser.add_argument("--codec-dir", default="")
    parser.add_argument("--codec-dtype", default="auto", help="as MOSS_CODEC_DTYPE")
    parser.add_argument("--repeats", type=int, default=5, help="codec: timed steps per case")
    parser.add_argument("--parts", default="lm,codec")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    if device.type != "cpu":
        parser.error("MOSS_PREPACK is for the CPU: use --device cpu")
    parts = set(args.parts.split(","))
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    flags = cpu_flags()
    report: dict[str, Any] = {
        "bench": "moss_prepack",
        "cpu": cpu_model(),
        "cpu_flags": {flag: flag in flags for flag in ("avx2", "avx512f", "avx512_bf16", "amx_bf16")},
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "size": "tiny" if args.tiny else "full",
    }
    if "lm" in parts:
        report["lm"] = lm_part(args)
    if "codec" in parts:
        report["codec"] = codec_part(args, device)
    report["load_average_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    report["elapsed_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2))
    for row in report.get("lm", {}).get("results", []):
        backbone = f"{row['plain_backbone_ms']} -> {row['prepacked_backbone_ms']} ms"
        local = f"{row['plain_local_ms']} -> {row['prepacked_local_ms']} ms"
        print(
            f"LM {row['streams']} stream(s): backbone {backbone}, local {local}, step x{row['step_speedup']}",
            file=sys.stderr,
        )
    for row in report.get("codec", {}).get("results", []):
        print(
            f"codec {row['case']}: {row['plain_ms']} -> {row['prepacked_ms']} ms (x{row['speedup']}), "
            f"audio error {row['audio_relative_error']:.1e}",
            file=sys.stderr,
        )
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
