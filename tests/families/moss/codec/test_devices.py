"""The npu path through the stand-in ``torch_npu`` (in a subprocess), and cuda (marked gpu)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from app.families.moss.codec.loading import load_codec
from app.families.moss.codec.model import MossAudioCodec

ROOT = Path(__file__).resolve().parents[4]


def test_npu_path_with_a_stand_in_torch_npu() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.families.moss.codec.npu_check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "moss npu path ok" in done.stdout


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu(tiny_moss_dir: Path, tiny_moss: MossAudioCodec) -> None:
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # compare float32 maths, not TF32
    try:
        cuda = load_codec(str(tiny_moss_dir), "cuda")
        codes = torch.randint(0, 1024, (40, 16), generator=torch.Generator().manual_seed(0))
        one_shot = cuda.decode(codes.cuda())
        assert one_shot.device.type == "cuda"
        torch.testing.assert_close(one_shot.cpu(), tiny_moss.decode(codes), atol=1e-4, rtol=1e-3)
        state, pieces = cuda.new_state(), []
        for start in range(0, 40, 3):
            pieces.extend(cuda.decode_step([codes[start : start + 3].cuda()], [state]))
        torch.testing.assert_close(torch.cat(pieces), one_shot, atol=1e-5, rtol=0)
        audio = torch.randn(1920 * 6, generator=torch.Generator().manual_seed(1)) * 0.3
        cuda_codes = cuda.encode([audio.cuda()], 16)[0].cpu()
        assert (cuda_codes == tiny_moss.encode([audio], 16)[0]).float().mean() > 0.95  # near-ties may flip
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
