"""Faster decoders for CPUs without bf16 matrix instructions? int8 and ONNX Runtime against float32.

    python -m bench.cpu_precision_eval --codec-dir DIR [--lengths 96,256] [--repeats 5] [--out F.json]
    ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 python -m bench.cpu_precision_eval ...  # AVX2 path

Variants, each on the same windows (batch 1, the server's CPU mode), against float32 eager:

- ``float32``: the decoder as the server runs it on such CPUs;
- ``int8_dynamic``: ``torch.ao.quantization.quantize_dynamic`` of every ``nn.Linear`` (int8 weights,
  activations quantized per batch at run time), with the ``x86`` (fbgemm) and ``onednn`` engines;
- ``onnxruntime``: the network up to the spectrum exported with ``torch.onnx.export`` and run by ONNX
  Runtime's CPU provider (all graph optimizations, the process's thread count); the ISTFT stays in torch.

Reports per variant the median seconds per window of each length, the speed-up against float32 and
the SNR (dB, lowest over four random 256-code windows, as the bf16 check of ``bench/codec_bench.py``)
of its audio against float32's. ``auto`` would adopt a variant on such CPUs only at >= 1.5x and
>= 30 dB. ``ONEDNN_MAX_CPU_ISA=AVX2`` and ``MKL_ENABLE_INSTRUCTIONS=AVX2`` hold oneDNN and MKL to
AVX2 on an AVX-512 machine; fbgemm and ONNX Runtime pick their kernels by the CPU's flags and ignore
both, so on such a machine their AVX2 figures are optimistic.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn

from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.codec.istft import MAX_MAGNITUDE
from app.families.neucodec.codec.loading import load_decoder
from bench.codec_bench import cpu_model, snr_db
from bench.saving import save_report

Decode = Callable[[torch.Tensor], torch.Tensor]  # [B, T] codes -> [B, T * hop] float32 audio


class _Spectrum(nn.Module):
    """The decoder up to the ISTFT's input, with the spectrum as (log-magnitude | phase) reals."""

    def __init__(self, decoder: NeuCodecDecoder) -> None:
        super().__init__()
        self.decoder = decoder

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        d = self.decoder
        x = d.fc_post_a(d.generator.quantizer(codes))  # [B, T, hidden]
        x = d.generator.backbone(x)  # [B, T, hidden]
        return d.generator.head.out(x).float()  # [B, T, n_fft + 2]


def spectrum_to_audio(decoder: NeuCodecDecoder, out: torch.Tensor) -> torch.Tensor:
    """The rest of ``ISTFTHead.forward`` in torch: ``[B, T, n_fft + 2]`` -> ``[B, T * hop]``."""
    log_mag, phase = out.chunk(2, dim=-1)  # each [B, T, n_fft // 2 + 1]
    mag = log_mag.exp().clamp(max=MAX_MAGNITUDE)
    return decoder.generator.head.istft(torch.complex(mag * phase.cos(), mag * phase.sin()))


def int8_decoder(codec_dir: str, engine: str) -> Decode:
    torch.backends.quantized.engine = engine
    model = load_decoder(codec_dir, torch.device("cpu"))
    qconfig = torch.ao.quantization.default_dynamic_qconfig
    # every linear layer but the FSQ's lookup projection (a table lookup, read for its dtype)
    spec = {
        name: qconfig
        for name, m in model.named_modules()
        if isinstance(m, nn.Linear) and "quantizer" not in name
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, spec, dtype=torch.qint8)


def onnx_decoder(codec_dir: str, tmp: Path) -> Decode:
    import onnxruntime as ort

    decoder = load_decoder(codec_dir, torch.device("cpu"))
    path = tmp / "decoder.onnx"
    example = torch.zeros(1, 96, dtype=torch.long)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Spectrum(decoder).eval(),
            (example,),
            str(path),
            input_names=["codes"],
            output_names=["spectrum"],
            dynamic_shapes={"codes": {0: torch.export.Dim("batch"), 1: torch.export.Dim("time")}},
            dynamo=True,
        )
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = torch.get_num_threads()
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def decode(codes: torch.Tensor) -> torch.Tensor:
        (spectrum,) = session.run(None, {"codes": codes.numpy()})
        return spectrum_to_audio(decoder, torch.from_numpy(spectrum))

    return decode


def timed(decode: Decode, codes: torch.Tensor, repeats: int) -> float:
    """Median seconds of ``repeats`` decodes after one warm-up."""
    decode(codes)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        decode(codes)
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--codec-dir", required=True, help="official-size codec checkpoint directory")
    parser.add_argument("--lengths", default="96,256", help="window lengths in codes (batch 1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--variants", default="int8_x86,int8_onednn,onnxruntime")
    parser.add_argument("--out", help="file name for the JSON under bench/results/")
    args = parser.parse_args(argv)
    lengths = [int(n) for n in args.lengths.split(",")]
    rng = np.random.default_rng(0)
    check = torch.from_numpy(rng.integers(0, 65536, (4, 256)))  # the bf16 check's windows
    windows = {n: torch.from_numpy(rng.integers(0, 65536, (1, n))) for n in lengths}
    reference = load_decoder(args.codec_dir, torch.device("cpu"))
    rows: dict[str, dict[str, object]] = {}
    with torch.inference_mode(), tempfile.TemporaryDirectory() as tmp:
        expected = reference(check).numpy()
        base = {n: timed(reference, codes, args.repeats) for n, codes in windows.items()}
        rows["float32"] = {"s_per_window": {str(n): round(t, 4) for n, t in base.items()}}
        builders: dict[str, Callable[[], Decode]] = {
            "int8_x86": lambda: int8_decoder(args.codec_dir, "x86"),
            "int8_onednn": lambda: int8_decoder(args.codec_dir, "onednn"),
            "onnxruntime": lambda: onnx_decoder(args.codec_dir, Path(tmp)),
        }
        for name in args.variants.split(","):
            try:
                decode = builders[name]()
                audio = np.concatenate([decode(check[i : i + 1]).numpy() for i in range(4)])
                snr = min(snr_db(r, o) for r, o in zip(expected, audio, strict=True))
                times = {n: timed(decode, codes, args.repeats) for n, codes in windows.items()}
            except Exception as exc:  # a variant that cannot be built here is reported, not fatal
                rows[name] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                print(f"{name}: {rows[name]['error']}", file=sys.stderr)
                continue
            rows[name] = {
                "s_per_window": {str(n): round(t, 4) for n, t in times.items()},
                "speedup": {str(n): round(base[n] / t, 2) for n, t in times.items()},
                "snr_db_min": round(snr, 1),
            }
            print(f"{name}: {rows[name]}", file=sys.stderr)
    report = {
        "bench": "cpu_precision_eval",
        "cpu": cpu_model(),
        "torch_threads": torch.get_num_threads(),
        "ONEDNN_MAX_CPU_ISA": os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
        "MKL_ENABLE_INSTRUCTIONS": os.environ.get("MKL_ENABLE_INSTRUCTIONS", ""),
        "torch": torch.__version__,
        "lengths": lengths,
        "repeats": args.repeats,
        "results": rows,
    }
    print(json.dumps(report))
    if args.out:
        save_report(report, args.out)


if __name__ == "__main__":
    main()
