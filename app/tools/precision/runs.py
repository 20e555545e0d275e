"""A run: one part's fixed inputs and captured outputs on one configuration, savable to one file.

The file is safetensors (no pickle: a run made on another machine is data, never code): tensors are
stored as ``input.NAME`` and ``output.NAME``, and the rest (part, source, configuration, the order of
the outputs, part options, torch version and device) as JSON in the header's ``precision`` entry.
A run loaded from a file compares exactly like the run that wrote it, and its inputs drive the runs
of the other configuration, so an NPU run can be compared with a CPU run made elsewhere.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from app.families.shared.run_config import RunConfig

FORMAT = "precision-run/1"
_META_KEY = "precision"


@dataclass
class Run:
    """``inputs`` drive the part; ``outputs`` are in capture order (shallow layers first)."""

    part: str
    source: str
    config: RunConfig
    inputs: dict[str, torch.Tensor]
    outputs: dict[str, torch.Tensor]
    options: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)


def environment(device: torch.device) -> dict[str, str]:
    """What produced a run: torch version, host architecture and the device's name."""
    env = {"torch": torch.__version__, "machine": platform.machine()}
    if device.type == "cuda":
        env["device_name"] = torch.cuda.get_device_name(device)
    elif device.type == "npu":
        env["device_name"] = torch.npu.get_device_name(device)  # type: ignore[attr-defined]  # torch_npu adds torch.npu
    else:
        env["device_name"] = _cpu_name()
    return env


def _cpu_name() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


def save_run(run: Run, path: Path) -> Path:
    """Write ``run`` to ``path`` (parent directories created); returns ``path``."""
    from safetensors.torch import save_file

    tensors = {f"input.{k}": v.detach().cpu().contiguous() for k, v in run.inputs.items()}
    tensors |= {f"output.{k}": v.detach().cpu().contiguous() for k, v in run.outputs.items()}
    header = {
        "format": FORMAT,
        "part": run.part,
        "source": run.source,
        "config": run.config.spec(),
        "outputs": list(run.outputs),
        "options": run.options,
        "environment": run.environment,
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata={_META_KEY: json.dumps(header)})
    return path


def load_run(path: Path) -> Run:
    """Read a run written by ``save_run``; ValueError when the file is not one."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt", device="cpu") as handle:
        metadata = handle.metadata() or {}
        if _META_KEY not in metadata:
            raise ValueError(f"{path} is not a precision run (no {_META_KEY!r} header)")
        header = json.loads(metadata[_META_KEY])
        if header.get("format") != FORMAT:
            raise ValueError(f"{path}: unsupported run format {header.get('format')!r}")
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118
    inputs = {k.removeprefix("input."): v for k, v in tensors.items() if k.startswith("input.")}
    outputs = {name: tensors[f"output.{name}"] for name in header["outputs"]}
    return Run(
        part=header["part"],
        source=header["source"],
        config=RunConfig.parse(header["config"]),
        inputs=inputs,
        outputs=outputs,
        options=header["options"],
        environment=header["environment"],
    )
