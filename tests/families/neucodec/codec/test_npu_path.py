"""The npu path, driven by a stand-in ``torch_npu`` (``tests/families/neucodec/codec/npu_stand_in.py``) in a
subprocess:
device resolution, and decodes through the ``torch.npu`` stream/event API (the copy on the copy stream,
compute waiting on its event), without CUDA graphs, equal to the cpu decode."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize("check", ["resolve", "decode"])
def test_npu_path_with_a_stand_in_torch_npu(check: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.families.neucodec.codec.npu_stand_in", check],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "npu path ok" in done.stdout
