"""The precision tool's MOSS codec part on the tiny codec: encoder stages and codes, decoder stages, audio."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from app.families.moss.precision.codec import voiced_signal
from app.families.shared.run_config import RunConfig
from app.tools.precision.__main__ import EXIT_FAIL, EXIT_PASS, EXIT_USAGE, main
from app.tools.precision.audio import mel_power
from app.tools.precision.compare import compare_runs
from app.tools.precision.parts import get_part
from app.tools.precision.runs import Run, load_run, save_run

FRAMES = 6
STAGES = [
    "encoder.1",
    "encoder.3",
    "encoder.5",
    "encoder.7",
    "decoder.0",
    "decoder.2",
    "decoder.4",
    "decoder.6",
]


def _run(source: str, config: RunConfig, frames: int = FRAMES) -> Run:
    part = get_part("moss-codec")
    inputs, options = part.make_inputs(source, 0, frames)
    return Run(part.name, source, config, inputs, part.run(source, config, inputs, options), options)


def test_part_captures_encoder_and_decoder_stages_codes_and_audio(tiny_moss_codec_dir: Path) -> None:
    run = _run(str(tiny_moss_codec_dir), RunConfig())
    assert run.inputs["audio"].shape == (FRAMES * 1920,)
    assert run.inputs["codes"].shape == (FRAMES, 16)
    assert list(run.outputs) == [*STAGES[:4], "codes", *STAGES[4:], "audio"]
    # positions per stage: 12.5 Hz x 8, 4, 2, 1 in the encoder, back up in the decoder
    assert [run.outputs[s].shape[0] for s in STAGES] == [f * FRAMES for f in (8, 4, 2, 1, 1, 2, 4, 8)]
    assert run.outputs["codes"].shape == (FRAMES, 32) and run.outputs["codes"].dtype == torch.int64
    assert run.outputs["audio"].shape == (FRAMES * 1920,)
    assert run.options["sample_rate"] == 24000
    # the decoder's last stage is the audio, 240 samples a position
    assert torch.equal(run.outputs["decoder.6"].reshape(-1), run.outputs["audio"])
    # the checkpoint written by the fixtures tool is the codec random:tiny builds in memory
    same = _run("random:tiny", RunConfig())
    assert all(torch.equal(run.outputs[k], same.outputs[k]) for k in run.outputs)


def test_bf16_codec_agrees_closely_but_not_exactly(tiny_moss_codec_dir: Path) -> None:
    ref = _run(str(tiny_moss_codec_dir), RunConfig(), frames=12)
    bf16 = _run(str(tiny_moss_codec_dir), RunConfig(dtype="bfloat16"), frames=12)
    comparison = compare_runs(ref, bf16, "codec")
    assert comparison.audio is not None and 20 < comparison.audio.snr_db < 80
    assert 0 < comparison.audio.log_mel_db < 1
    assert all(0 < comparison.tensors[s].rel_l2 < 0.05 for s in STAGES)
    assert set(comparison.codes) == {"codes"} and "codes" not in comparison.tensors
    codes = comparison.codes["codes"]
    # the coarse codebook holds in most frames: bf16 rounds differently by CPU (emulated where there are
    # no bf16 instructions), so a frame whose residual lies near a code boundary may flip
    assert codes.codebooks == 32 and codes.per_codebook[0] >= 0.75
    assert 0.8 < codes.mean <= 1.0


def test_codes_stay_integers_through_a_saved_run(tiny_moss_codec_dir: Path, tmp_path: Path) -> None:
    run = _run(str(tiny_moss_codec_dir), RunConfig(dtype="bfloat16"))
    loaded = load_run(save_run(run, tmp_path / "run.safetensors"))
    assert loaded.outputs["codes"].dtype == torch.int64
    assert all(torch.equal(loaded.outputs[k], run.outputs[k]) for k in run.outputs)
    again = compare_runs(run, loaded, "codec")
    assert again.codes["codes"].mean == 1.0 and again.codes["codes"].all_codebooks == 1.0


def test_voiced_signal_is_seeded_speech_band_audio() -> None:
    a, b = voiced_signal(24000, 24000, 0), voiced_signal(24000, 24000, 1)
    assert torch.equal(a, voiced_signal(24000, 24000, 0)) and not torch.equal(a, b)
    assert a.dtype == torch.float32 and float(a.abs().max()) == pytest.approx(0.5)
    power = mel_power(a, 24000).sum(-1)  # 80 mel bands from 0 to 12 kHz
    below_4k = power[:52].sum() / power.sum()  # band 52 of 80 is about 4 kHz on the mel scale
    assert below_4k > 0.95


def test_cli_limits_code_agreement_and_reports_it(
    tiny_moss_codec_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["moss-codec", "--source", str(tiny_moss_codec_dir), "--length", "4"]
    assert main([*common, "--test", "cpu,float32", "--min-code-agreement", "1", "--json", "-"]) == EXIT_PASS
    report = json.loads(capsys.readouterr().out)
    (codes,) = report["comparisons"][0]["codes"]
    assert codes["name"] == "codes" and codes["per_codebook"] == [1.0] * 32
    assert "codes" not in [t["name"] for t in report["comparisons"][0]["tensors"]]
    assert report["thresholds"] == {"min_code_agreement": 1.0}
    assert main([*common, "--test", "cpu,bfloat16", "--min-code-agreement", "1.01"]) == EXIT_FAIL
    out = capsys.readouterr().out
    assert "identical codes" in out and "FAIL: codes: mean code agreement" in out
    assert main([*common, "--test", "cpu,float32,sdpa_fp32"]) == EXIT_USAGE  # one attention kernel
    assert main(["moss-codec", "--source", "random:huge"]) == EXIT_USAGE
    assert main([*common, "--length", "0"]) == EXIT_USAGE
