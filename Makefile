# Two commands for a newcomer: `make serve` and `make test`. Everything else is optional.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# torch is installed on its own: 2.13.0 is the CPU build on the project's machines. On a GPU host the
# same spec pulls the CUDA build from PyPI; on a CPU-only host elsewhere add the CPU wheel index:
#   make serve TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
FIXTURES := .fixtures
# processes the suite runs in (pytest-xdist): the 2 cores of the project's machines
PYTEST_WORKERS ?= 2
# The demo: both model families on the tiny random checkpoints of `python -m app.tools.fixtures`, on the
# CPU, never reaching a hub. `MODEL_FAMILIES=neucodec make demo` (or moss) serves one of them.
MODEL_FAMILIES ?= neucodec,moss
DEMO_ENV := LM_BACKEND=transformers TTS_MODEL=$(FIXTURES)/lm CODEC_MODEL=$(FIXTURES)/codec \
	MOSS_TTS_MODEL=$(FIXTURES)/moss_tts MOSS_CODEC_MODEL=$(FIXTURES)/moss_codec \
	MODEL_FAMILIES=$(MODEL_FAMILIES) DEVICE=cpu HF_HUB_OFFLINE=1
# the writers of the checkpoints: the fixtures are written again when one changes
FIXTURE_WRITERS := $(wildcard app/tools/fixtures/*.py app/lm/byte_tokenizer.py app/lm/planted_stop.py app/families/*/fixtures/*.py)

.PHONY: install system-deps serve demo test lint fixtures bench-codec bench-stitch bench-audio bench-normalizer \
	bench-demo bench-soak bench-server-speed bench-moss-codec bench-moss-lm bench-moss-server gradio clean

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-gradio.txt requirements-clients.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) $(TORCH_SPEC)
	$(VENV)/bin/pip install -q -r requirements-dev.txt
	$(VENV)/bin/pip install -q --no-deps -r requirements-clients.txt
	touch $@

install: $(VENV)/.installed

# Debian packages the tests and benchmarks use: espeak-ng makes real speech (reference audio, quality bench),
# chromium runs the browser test of the Gradio app (driven by Playwright; its own browser download is never
# used) and ffmpeg encodes the Gradio app's streamed audio player
system-deps:
	@command -v espeak-ng >/dev/null || { apt-get update -qq && apt-get install -y -qq espeak-ng >/dev/null; }
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
	@command -v ffmpeg >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null; }

## serve: the server with the embedded default engine (real model ids, downloaded on first use)
serve: install
	LM_BACKEND=transformers $(PY) -m app

$(FIXTURES)/.written: $(FIXTURE_WRITERS) | install
	$(PY) -m app.tools.fixtures --out $(FIXTURES)
	touch $@

fixtures: $(FIXTURES)/.written

## demo: the same server, both model families, on tiny random checkpoints (offline; it makes noise, not
## speech: a few seconds of it per request, the checkpoints' planted stop)
demo: install fixtures
	$(DEMO_ENV) $(PY) -m app

## test: lint, import contracts, type check + the whole suite (CPU, offline)
test: install system-deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -n $(PYTEST_WORKERS)

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check . && $(VENV)/bin/lint-imports && $(VENV)/bin/mypy

bench-codec: install
	$(PY) -m bench.codec_bench --out codec_cpu.json

## bench-moss-codec: the MOSS codec on full-size random weights (~9 GB of RAM; CPU by default)
bench-moss-codec: install
	$(PY) -m bench.moss_codec_bench --out moss_codec_cpu.json

## bench-moss-lm: MOSS-TTS-Realtime's LM on full-size random weights (~9 GB of RAM; CPU by default)
bench-moss-lm: install
	$(PY) -m bench.moss_lm_bench --out moss_lm_cpu.json

## bench-moss-server: MOSS end to end through the speech service, full-size random LM + codec (~12 GB)
bench-moss-server: install
	$(PY) -m bench.moss_server_bench --out moss_server_cpu.json

bench-stitch: install
	$(PY) -m bench.stitch_bench --out stitch_cpu.json

## bench-server-speed: old against new codec defaults through two real servers (full-size random decoder)
bench-server-speed: install
	$(PY) -m bench.server_speed_bench --rounds 2 --out server_speed_cpu.json

bench-audio: install system-deps
	$(PY) -m bench.audio_quality --out audio_quality_cpu.json

bench-normalizer: install
	$(PY) -m bench.normalizer_agreement --out normalizer_spoken_cpu.json

## gradio: the Gradio UI on :7860 for the server at TTS_API_BASE_URL (default http://localhost:9091)
gradio: install
	$(PY) gradio_app.py

## bench-demo: the load benchmark against the demo stack (fixtures + fake vLLM at 100 tokens/s), levels 1,4,16;
## the report goes to bench/results/tmp/load_demo.json (BENCH_OUT=NAME.json: bench/results/NAME.json)
bench-demo: install fixtures
	PY=$(PY) FIXTURES=$(FIXTURES) bench/run_demo.sh

## bench-soak: memory soak of the demo stack: 1000 streamed requests at concurrency 16, 30% dropped mid-stream
bench-soak: install fixtures
	$(PY) -m bench.soak --codec-model $(FIXTURES)/codec --out soak_cpu.json

clean:
	rm -rf $(FIXTURES) .pytest_cache .ruff_cache
