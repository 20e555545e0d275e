#!/usr/bin/env bash
# `make bench-demo`: the load benchmark against the demo stack on this machine. Starts the fake vLLM
# (random codes, paced like a real LM stream) and the API on the tiny random fixtures, waits for /ready,
# runs bench/bench.py, then stops both. Tiny random checkpoints + a fake LM: this measures the serving
# path (HTTP, streaming, stitcher, codec worker, post stages), not a model.
#   BENCH_LEVELS=1,4,16 BENCH_REQUESTS=8 BENCH_TOKENS_PER_S=100 BENCH_OUT=mine.json bench/run_demo.sh
# The report goes to bench/results/tmp/load_demo.json (ignored by git) unless BENCH_OUT names another
# file (a bare name lands in bench/results/, next to the measured runs the docs quote); BENCH_REQUESTS
# sets the requests per level (default: max(24, 4 x level)).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
FIXTURES=${FIXTURES:-.fixtures}
LM_PORT=${BENCH_LM_PORT:-19093}
API_PORT=${BENCH_API_PORT:-19091}
LEVELS=${BENCH_LEVELS:-1,4,16}
TOKENS_PER_S=${BENCH_TOKENS_PER_S:-100}
OUT=${BENCH_OUT:-bench/results/tmp/load_demo.json}
REQUESTS=()
if [[ -n "${BENCH_REQUESTS:-}" ]]; then REQUESTS=(--requests "$BENCH_REQUESTS"); fi
LOGS=$(mktemp -d)

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$LOGS"
}
trap cleanup EXIT

"$PY" -m tests.fakes.fake_vllm --port "$LM_PORT" --tokens-per-s "$TOKENS_PER_S" --tokens-per-event 1 \
  >"$LOGS/lm.log" 2>&1 &
pids+=($!)
LM_BACKEND=http TTS_API="http://127.0.0.1:$LM_PORT" CODEC_MODEL="$FIXTURES/codec" DEVICE=cpu \
  REFERENCE_VOICES=false HOST=127.0.0.1 PORT="$API_PORT" LOG_LEVEL=warning "$PY" -m app >"$LOGS/api.log" 2>&1 &
pids+=($!)

for _ in $(seq 120); do
  if "$PY" -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1], timeout=2)" \
    "http://127.0.0.1:$API_PORT/ready" 2>/dev/null; then
    ready=1
    break
  fi
  sleep 0.5
done
if [[ -z "${ready:-}" ]]; then
  echo "the demo API did not become ready; its log:" >&2
  cat "$LOGS/api.log" "$LOGS/lm.log" >&2
  exit 1
fi

"$PY" -m bench.bench --url "http://127.0.0.1:$API_PORT" --voice alloy,nova --levels "$LEVELS" \
  --label "demo: tiny random codec + fake vLLM at ${TOKENS_PER_S} tokens/s per stream, $(nproc) CPU cores" \
  --out "$OUT" "${REQUESTS[@]}" "$@"
