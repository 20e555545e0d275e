"""The precision tool on the tiny fixtures: parts, saved runs, limits and exit codes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from app.families.shared.run_config import RunConfig
from app.tools.precision.__main__ import EXIT_FAIL, EXIT_PASS, EXIT_USAGE, main
from app.tools.precision.compare import Comparison, Thresholds, check_same_inputs, compare_runs, judge
from app.tools.precision.metrics import NextTokenAgreement, TensorAgreement
from app.tools.precision.parts import get_part
from app.tools.precision.runs import Run, environment, load_run, save_run


def _run(part_name: str, source: str, config: RunConfig, seed: int = 0, length: int = 24) -> Run:
    part = get_part(part_name)
    inputs, options = part.make_inputs(source, seed, length)
    outputs = part.run(source, config, inputs, options)
    return Run(part_name, source, config, inputs, outputs, options, environment(torch.device("cpu")))


# --- configurations -----------------------------------------------------------------------------------


def test_config_parses_labels_and_round_trips() -> None:
    config = RunConfig.parse("npu:1, bfloat16, sdpa_fp32")
    assert config == RunConfig("npu:1", "bfloat16", "sdpa_fp32")
    assert config.label == "npu1-bf16-sdpa_fp32"
    assert RunConfig.parse(config.spec()) == config
    assert RunConfig.parse("cpu,float32").attention == "sdpa"


@pytest.mark.parametrize("text", ["cpu", "gpu,float32", "cpu,float8", "cpu,float32,flash", "cpu,,sdpa"])
def test_bad_configs_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        RunConfig.parse(text)


# --- the decoder part and saved runs --------------------------------------------------------------------


def test_decoder_part_captures_each_layer_and_the_audio(tiny_codec_dir: Path) -> None:
    run = _run("neucodec-decoder", str(tiny_codec_dir), RunConfig())
    assert list(run.outputs) == ["fc_post_a", "transformer.00", "transformer.01", "backbone", "audio"]
    assert run.outputs["fc_post_a"].shape == (24, 64)
    assert run.outputs["audio"].shape == (24 * 480,)
    assert run.options["sample_rate"] == 24000
    # fp32 attention in a float32 decoder is the same computation
    same = _run("neucodec-decoder", str(tiny_codec_dir), RunConfig(attention="sdpa_fp32"))
    assert all(torch.equal(run.outputs[k], same.outputs[k]) for k in run.outputs)


def test_bf16_decoder_agrees_closely_but_not_exactly(tiny_codec_dir: Path) -> None:
    ref = _run("neucodec-decoder", str(tiny_codec_dir), RunConfig())
    bf16 = _run("neucodec-decoder", str(tiny_codec_dir), RunConfig(dtype="bfloat16"))
    comparison = compare_runs(ref, bf16, "codec")
    assert comparison.audio is not None
    assert 10 < comparison.audio.snr_db < 80
    assert 0 < comparison.tensors["backbone"].rel_l2 < 0.1
    assert comparison.tensors["fc_post_a"].cosine > 0.999


def test_saved_run_loads_back_identically(tiny_codec_dir: Path, tmp_path: Path) -> None:
    run = _run("neucodec-decoder", str(tiny_codec_dir), RunConfig(dtype="bfloat16"))
    loaded = load_run(save_run(run, tmp_path / "deep" / "run.safetensors"))
    assert (loaded.part, loaded.source, loaded.config) == (run.part, run.source, run.config)
    assert (loaded.options, loaded.environment) == (run.options, run.environment)
    assert list(loaded.outputs) == list(run.outputs)
    assert all(torch.equal(loaded.outputs[k], run.outputs[k]) for k in run.outputs)
    assert all(torch.equal(loaded.inputs[k], run.inputs[k]) for k in run.inputs)
    again = compare_runs(run, loaded, "codec")
    assert again.audio is not None and again.audio.snr_db == math.inf


def test_a_plain_safetensors_file_is_not_a_run(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(2)}, str(tmp_path / "x.safetensors"))
    with pytest.raises(ValueError, match="not a precision run"):
        load_run(tmp_path / "x.safetensors")


def test_runs_of_different_inputs_are_not_compared(tiny_codec_dir: Path) -> None:
    a = _run("neucodec-decoder", str(tiny_codec_dir), RunConfig(), seed=0)
    b = _run("neucodec-decoder", str(tiny_codec_dir), RunConfig(), seed=1)
    with pytest.raises(ValueError, match="same inputs"):
        check_same_inputs(a, b)


# --- the LM part ------------------------------------------------------------------------------------------


def test_lm_part_teacher_forces_speech_tokens_and_keeps_the_sampled_logits(tiny_lm_dir: Path) -> None:
    part, source = get_part("neucodec-lm"), str(tiny_lm_dir)
    inputs, options = part.make_inputs(source, 0, 16)

    def run(config: RunConfig) -> Run:
        return Run(part.name, source, config, inputs, part.run(source, config, inputs, options), options)

    ref = run(RunConfig())
    assert list(ref.outputs) == ["layer.00", "layer.01", "norm", "logits"]
    total = inputs["input_ids"].numel()
    assert total == options["prompt_length"] + 16
    assert ref.outputs["layer.00"].shape == (total, 32)
    assert ref.outputs["logits"].shape == (16, 65536 + 1)  # speech tokens + <|im_end|>
    for config in (RunConfig(dtype="bfloat16"), RunConfig("cpu", "bfloat16", "sdpa_fp32")):
        comparison = compare_runs(ref, run(config), "lm")
        assert comparison.next_token is not None and comparison.next_token.positions == 16
        assert comparison.next_token.top1_agreement > 0.8
        assert 0 < comparison.tensors["logits"].rel_l2 < 0.05
    eager = compare_runs(ref, run(RunConfig(attention="eager")), "lm")
    assert eager.tensors["logits"].rel_l2 < 1e-5 and eager.next_token is not None
    assert eager.next_token.top1_agreement == 1.0


# --- limits -------------------------------------------------------------------------------------------------


def _comparison(cosine: float, kl: float) -> Comparison:
    run = Run("p", "s", RunConfig(), {}, {})
    tensor = TensorAgreement((2,), cosine, 0.02, 0.1, 0.01, 34.0)
    token = NextTokenAgreement(4, 0.75, 5, 0.9, kl, kl, 0.1, 0.05, 0.5, [kl] * 4, [0.1] * 4)
    return Comparison(run, run, {"x": tensor}, next_token=token)


def test_limits_name_what_breaks_and_nan_never_passes() -> None:
    limits = Thresholds(min_cosine=0.99, max_rel_l2=0.05, min_top1=0.8, max_kl_mean=0.01, max_share_tv=0.6)
    assert judge(_comparison(0.999, 0.001), limits) == ["top-1 agreement 0.75 breaks 0.8"]
    failures = judge(_comparison(float("nan"), float("nan")), limits)
    assert any(f.startswith("x: cosine nan") for f in failures)
    assert any(f.startswith("mean KL nan") for f in failures)
    assert judge(_comparison(0.5, 5.0), Thresholds()) == []  # no limits, nothing checked


# --- the command line ---------------------------------------------------------------------------------------


def test_cli_exit_codes_and_json(
    tiny_codec_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["neucodec-decoder", "--source", str(tiny_codec_dir), "--length", "20"]
    assert (
        main([*common, "--test", "cpu,float32", "--min-cosine", "0.999999", "--min-audio-snr-db", "100"])
        == EXIT_PASS
    )
    out = tmp_path / "report.json"
    code = main([*common, "--test", "cpu,bfloat16", "--min-audio-snr-db", "200", "--json", str(out)])
    assert code == EXIT_FAIL
    report = json.loads(out.read_text())
    assert report["passed"] is False
    assert report["comparisons"][0]["failures"][0].startswith("audio SNR")
    assert report["comparisons"][0]["label"] == "cpu-bf16-sdpa"
    assert [t["name"] for t in report["comparisons"][0]["tensors"]][-1] == "audio"
    assert "FAIL: audio SNR" in capsys.readouterr().out
    assert main([*common, "--test", "cpu,float8"]) == EXIT_USAGE
    assert main([*common, "--test", "cpu,float32,eager"]) == EXIT_USAGE  # one attention kernel in the codec
    assert main(["neucodec-decoder", "--source", str(tmp_path / "missing")]) == EXIT_USAGE
    assert "error:" in capsys.readouterr().err


def test_cli_compares_runs_saved_elsewhere_like_runs_made_here(
    tiny_codec_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["neucodec-decoder", "--length", "20"]
    here = [*common, "--source", str(tiny_codec_dir), "--test", "cpu,bfloat16", "--save-dir", str(tmp_path)]
    assert main([*here, "--json", "-"]) == EXIT_PASS
    made_here = json.loads(capsys.readouterr().out)
    ref_file = tmp_path / "neucodec-decoder-cpu-fp32-sdpa.safetensors"
    test_file = tmp_path / "neucodec-decoder-cpu-bf16-sdpa.safetensors"
    assert main([*common, "--ref", str(ref_file), "--test", str(test_file), "--json", "-"]) == EXIT_PASS
    from_files = json.loads(capsys.readouterr().out)
    assert from_files["comparisons"][0]["tensors"] == made_here["comparisons"][0]["tensors"]
    assert from_files["comparisons"][0]["audio"] == made_here["comparisons"][0]["audio"]
    # a saved reference drives a fresh run: its inputs and its source are used
    assert main([*common, "--ref", str(ref_file), "--test", "cpu,bfloat16", "--json", "-"]) == EXIT_PASS
    mixed = json.loads(capsys.readouterr().out)
    assert mixed["comparisons"][0]["audio"] == made_here["comparisons"][0]["audio"]
    assert main(["neucodec-lm", "--ref", str(ref_file)]) == EXIT_USAGE  # a decoder run is not an LM run


def test_cli_lm_report_has_next_token_checks(tiny_lm_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["neucodec-lm", "--source", str(tiny_lm_dir), "--length", "8", "--test", "cpu,bfloat16,sdpa_fp32"]
    assert main([*args, "--min-top1", "0.5", "--max-kl-mean", "0.01", "--json", "-"]) == EXIT_PASS
    report = json.loads(capsys.readouterr().out)
    token = report["comparisons"][0]["next_token"]
    assert token["positions"] == 8 and len(token["kl"]) == 8
    assert report["thresholds"] == {"min_top1": 0.5, "max_kl_mean": 0.01}
    assert main([*args, "--max-kl-mean", "0"]) == EXIT_FAIL  # bf16 never matches float32 exactly
