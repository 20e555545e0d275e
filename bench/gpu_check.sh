#!/usr/bin/env bash
# The GPU checks as one run on a GPU host, under 10 minutes (each step has a timeout, 560 s in all):
# the gpu-marked tests; end to end with the fake LM at 200 tokens/s per stream at 1, 8, 32 and 64
# streams (first audio p50/p95, stalls, audio s/s; the previous defaults side by side); the codec alone
# at 64 streams with CUDA graphs, bf16 and TF32; the MOSS engine at 1 to 32 sessions. Results land in
# $OUT (default /tmp/gpu_check) and bench/results/.
# Needs python3 with a CUDA torch; packages the image lacks can be put on PYTHONPATH first.
set -uo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
OUT=${OUT:-/tmp/gpu_check}
FULL=${FULL:-/tmp/full}
mkdir -p "$OUT"
step() { echo "== $* ($(date -u +%T))" | tee -a "$OUT/steps.txt"; }
step gpu
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" | tee -a "$OUT/gpu.txt"
step tests
timeout 60 python3 -m pytest -q -p no:warnings -p no:cacheprovider -o addopts="" -m gpu tests/codec \
  tests/families/neucodec/codec 2>&1 | tee "$OUT/gpu_tests.log"
step fixtures
[ -f "$FULL/codec/pytorch_model.bin" ] || python3 -m app.tools.fixtures --out "$FULL" --full-size-codec >/dev/null
step end to end, fake LM at 200 tokens/s
timeout 200 python3 -m bench.latency_bench --codec-dir "$FULL/codec" --device cuda --rounds 1 --rates 200 \
  --streams 1,8,32,64 --instant-streams 64 --out latency_gpu.json 2>&1 | tee "$OUT/latency.log"
step codec alone at 64 streams: graphs, bf16
timeout 90 python3 -m bench.codec_bench --codec-dir "$FULL/codec" --device cuda --streams 64 --seconds 10 \
  --engines batched,batched+graphs,batched+bf16+graphs --out codec_gpu.json 2>&1 | tee "$OUT/codec.log"
step codec alone at 64 streams: TF32 float32 products
NVIDIA_TF32_OVERRIDE=1 timeout 60 python3 -m bench.codec_bench --codec-dir "$FULL/codec" --device cuda \
  --streams 64 --seconds 10 --engines batched+graphs --out codec_gpu_tf32.json 2>&1 | tee "$OUT/codec_tf32.log"
step MOSS engine, 1 to 32 sessions
timeout 150 python3 -m bench.moss_lm_bench --device cuda --frames 24 --concurrency 1,4,8,16,32 --no-baseline \
  --out moss_lm_gpu.json 2>&1 | tee "$OUT/moss_lm.log"
cp bench/results/latency_gpu.json bench/results/codec_gpu.json bench/results/codec_gpu_tf32.json \
  bench/results/moss_lm_gpu.json "$OUT/" 2>/dev/null || true
step done
