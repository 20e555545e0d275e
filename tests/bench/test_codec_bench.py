"""bench/codec_bench.py's shapes mode on the tiny codec: plain against prepacked, per dtype and shape."""

from __future__ import annotations

import json

import pytest
import torch

from app.codec.prepack import fast_packed_convolutions
from bench.codec_bench import main
from tests.packing import packs

LINEARS, CONVOLUTIONS = 12, 9  # of the tiny decoder


@pytest.mark.usefixtures("one_torch_thread")
def test_shapes_mode_times_plain_against_prepacked(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--mode", "shapes", "--tiny", "--device", "cpu", "--shapes", "1x8,2x8", "--runs", "2"])
    report = json.loads(capsys.readouterr().out)
    assert report["mode"] == "shapes" and set(report["cpu_flags"]) >= {"avx2", "avx512_bf16", "amx_bf16"}
    rows = {(row["dtype"], row["batch"], row["codes"]): row for row in report["results"]}
    assert set(rows) == {(dtype, b, 8) for dtype in ("float32", "bfloat16") for b in (1, 2)}
    for (dtype, _, _), row in rows.items():
        assert len(row["plain_ms_all"]) == len(row["prepacked_ms_all"]) == 2
        left = 0 if fast_packed_convolutions() else CONVOLUTIONS  # below AVX-512: left plain by choice
        packed = LINEARS + CONVOLUTIONS - left if packs(getattr(torch, dtype)) else 0
        assert (row["layers_prepacked"], row["convolutions_left"]) == (packed, left)
        assert row["layers_plain"] == LINEARS + CONVOLUTIONS - left - packed
        assert row["rel_sq_error"] < (1e-9 if dtype == "float32" else 1e-2)
        # a batch equals its rows decoded alone; with plain convolutions (below AVX-512) oneDNN may run
        # another float32 kernel for a batch than for one row: then equal within float32 rounding
        assert row["batch_vs_alone_max_abs"] <= (1e-5 if left else 0.0)
