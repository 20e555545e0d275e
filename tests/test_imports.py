"""Importing the app does no work: no model library, no thread, no socket, in milliseconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import importlib, json, sys, threading, time
started = time.perf_counter()
for name in {modules!r}:
    importlib.import_module(name)
print(json.dumps({{
    "seconds": time.perf_counter() - started,
    "threads": threading.active_count(),
    "heavy": sorted(m for m in ("torch", "transformers", "av", "scipy", "redis") if m in sys.modules),
}}))
"""


TORCH_MODULES = {  # packages and modules that wrap torch, redis or a device: the lifespan imports them
    "app.__main__",
    "app.tools",
    "app.core.device",
    "app.codec",
    "app.lm.attention",
    "app.lm.padded_cache",
    "app.lm.planted_stop",
    "app.lm.sampling",
    *(
        f"app.families.{family}.{part}"
        for family in ("neucodec", "moss")
        for part in ("codec", "fixtures", "precision")
    ),
    *(
        f"app.families.neucodec.lm.{name}"
        for name in ("transformers_source", "engine", "loading", "sampling")
    ),
    "app.families.neucodec.lm.speech_head",
    *(f"app.families.moss.lm.{name}" for name in ("model", "local", "loader", "sampling", "engine")),
    "app.families.shared.precision_part",
    "app.families.shared.scheduler",
    "app.families.shared.run_config",
}


def _prefixes(name: str) -> list[str]:
    """``a.b.c`` -> ``a``, ``a.b``, ``a.b.c``."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def test_importing_every_server_module_starts_nothing_and_loads_no_model_library() -> None:
    names = [  # from the files: pkgutil.walk_packages would import every package to walk it
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in sorted((ROOT / "app").rglob("*.py"))
    ]
    modules = [
        name
        for name in names
        if not any(part in TORCH_MODULES for part in _prefixes(name)) and not name.endswith(".redis")
    ]
    # the modules that wrap torch, redis or a device are imported by the lifespan, never at import
    assert "app.main" in modules and "app.families.neucodec.family" in modules
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(modules=modules)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    report = json.loads(out.stdout)
    assert report["threads"] == 1  # no thread started at import
    assert report["heavy"] == []  # torch, transformers, PyAV, SciPy and redis load when the app starts
