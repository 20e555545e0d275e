"""bench/codec_bench.py on the tiny codec: shapes mode (plain against prepacked, per dtype and shape) and
packed mode (lone calls against one packed call, per dtype and mix of window lengths)."""

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


@pytest.mark.usefixtures("one_torch_thread")
def test_packed_mode_times_lone_calls_against_one_packed_call(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--mode", "packed", "--tiny", "--device", "cpu", "--mixes", "4+9,6+6+12", "--runs", "2"])
    report = json.loads(capsys.readouterr().out)
    assert report["mode"] == "packed"
    rows = {(row["dtype"], tuple(row["lengths"])): row for row in report["results"]}
    assert set(rows) == {(dtype, mix) for dtype in ("float32", "bfloat16") for mix in ((4, 9), (6, 6, 12))}
    for (dtype, _), row in rows.items():
        assert len(row["lone_ms_all"]) == len(row["packed_ms_all"]) == 2
        assert row["ratio"] == pytest.approx(row["packed_ms"] / row["lone_ms"], rel=0.1)  # ms are rounded
        # each packed window is its lone decode, up to the tiny decoder's rounding (float32) or bf16's
        assert row["packed_vs_alone_max_abs"] <= (5e-5 if dtype == "float32" else 0.1)
