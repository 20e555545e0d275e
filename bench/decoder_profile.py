"""Where the decoder spends its device time, per dtype: the top operators of one batched forward.

    python -m bench.decoder_profile --codec-dir DIR [--device cuda] [--batch 4] [--length 512]

Prints, for float32 and bfloat16, the median forward time over a few runs and the operators with the
most self device time (torch.profiler). For finding what makes one dtype slower than another.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

from app.core.device import resolve_device, synchronize
from app.families.neucodec.codec.loading import load_decoder


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--codec-dir", required=True)
    parser.add_argument("--device", default="")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--rows", type=int, default=12)
    args = parser.parse_args()
    device = resolve_device(args.device)
    codes = torch.randint(0, 65536, (args.batch, args.length), device=device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    for dtype in (torch.float32, torch.bfloat16):
        decoder = load_decoder(args.codec_dir, device)
        if dtype != torch.float32:
            decoder.cast(dtype)
        with torch.inference_mode():
            for _ in range(3):
                decoder(codes)
            times = []
            for _ in range(5):
                synchronize(device)
                started = time.perf_counter()
                decoder(codes)
                synchronize(device)
                times.append(time.perf_counter() - started)
            with profile(activities=activities) as prof:
                decoder(codes)
                synchronize(device)
        shape = f"{args.batch} x {args.length}"
        print(f"\n=== {dtype}: {statistics.median(times) * 1000:.1f} ms per forward of {shape}")
        print(prof.key_averages().table(sort_by=sort, row_limit=args.rows))


if __name__ == "__main__":
    main()
