# syntax=docker/dockerfile:1
# The API server image. torch comes from TORCH_INDEX: the CPU wheel index by default; for the CUDA build
# use PyPI itself (its Linux x86_64 torch wheels are the CUDA builds and bring their CUDA libraries):
#   docker build -t streaming-tts:cpu .
#   docker build -t streaming-tts:cuda --build-arg TORCH_INDEX=https://pypi.org/simple .
# Keep TORCH_SPEC equal to the Makefile's (a test checks).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG TORCH_SPEC=torch==2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
COPY requirements.txt /tmp/requirements.txt
RUN /opt/venv/bin/pip install --index-url "${TORCH_INDEX}" "${TORCH_SPEC}" \
 && /opt/venv/bin/pip install -r /tmp/requirements.txt

FROM ${PYTHON_IMAGE} AS runtime
RUN useradd --create-home --uid 10001 --user-group tts \
 && mkdir -p /data/voices /home/tts/.cache/huggingface \
 && chown -R tts:tts /data /home/tts
COPY --from=build /opt/venv /opt/venv
WORKDIR /srv
COPY app ./app
# WORKERS > 1 starts that many processes, each with its own engine (on one GPU, run CUDA MPS: docs/deployment.md);
# their metrics are merged through a directory of each start's own (python -m app makes it, under PROMETHEUS_MULTIPROC_DIR or /tmp)
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HOME=/home/tts/.cache/huggingface \
    VOICES_DIR=/data/voices \
    HOST=0.0.0.0 \
    PORT=9091 \
    LOG_LEVEL=info \
    WORKERS=1
USER tts
EXPOSE 9091
HEALTHCHECK --interval=15s --timeout=5s --start-period=180s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ['PORT'], timeout=4)"]
# The app's own entry point, as `make serve`: JSON logs, SHUTDOWN_GRACE_S, header timeout, WORKERS (docs/security.md)
CMD ["python", "-m", "app"]
