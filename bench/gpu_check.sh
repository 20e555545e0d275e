#!/usr/bin/env bash
# The GPU checks as one run (for a lent GPU machine): the gpu-marked tests, then the codec bench on
# the full-size random decoder. Results land in $OUT (default /tmp/gpu_check). Needs python3 with a
# CUDA torch; packages the image lacks can be put on PYTHONPATH first.
set -uo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name())" | tee -a "$OUT/gpu.txt"
python3 -m pytest -q -p no:warnings -p no:cacheprovider -o addopts="" -m gpu tests/codec 2>&1 | tee "$OUT/gpu_tests.log"
python3 -m app.tools.fixtures --out /tmp/full --full-size-codec >/dev/null
python3 -m bench.codec_bench --codec-dir /tmp/full/codec --device cuda --streams "${STREAMS:-1,8,32,64}" \
  --seconds "${SECONDS_PER_STREAM:-20}" --out codec_h200.json 2>&1 | tee "$OUT/bench.log"
cp bench/results/codec_h200.json "$OUT/" 2>/dev/null || true
python3 -m bench.decoder_profile --codec-dir /tmp/full/codec --device cuda 2>&1 | tee "$OUT/profile.log"
