"""The precision tool's MOSS-TTS-Realtime parts on the tiny checkpoint: the seed's prefill through the
backbone, and teacher-forced frames through the backbone and the local transformer's 16 heads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from app.families.moss.lm.loader import load_moss_lm
from app.families.moss.lm.prompt import MossPrompter
from app.families.moss.lm.types import AUDIO_BOS, AUDIO_PAD, CODEBOOKS
from app.families.moss.precision.lm import PROMPT_TEXT, REFERENCE_FRAMES
from app.families.shared.run_config import RunConfig
from app.tools.precision.__main__ import EXIT_FAIL, EXIT_PASS, main
from app.tools.precision.compare import compare_runs
from app.tools.precision.parts import get_part
from app.tools.precision.runs import Run

LAYERS = ["backbone.layer.00", "backbone.layer.01", "backbone.norm"]
HEADS = [f"local.head.{i:02d}" for i in range(CODEBOOKS)]


def _runs(part_name: str, source: str, length: int, *configs: RunConfig) -> list[Run]:
    part = get_part(part_name)
    inputs, options = part.make_inputs(source, 0, length)
    return [
        Run(part.name, source, config, inputs, part.run(source, config, inputs, options), options)
        for config in configs
    ]


def test_backbone_part_runs_the_seeds_prefill_per_layer(moss_tts_dir: Path) -> None:
    ref, eager, bf16 = _runs(
        "moss-backbone",
        str(moss_tts_dir),
        10,
        RunConfig(),
        RunConfig(attention="eager"),
        RunConfig(dtype="bfloat16"),
    )
    rows = ref.inputs["rows"]
    loaded = load_moss_lm(str(moss_tts_dir))
    prompter = MossPrompter(loaded.tokenizer, loaded.ids)
    text = prompter.text_ids(PROMPT_TEXT)
    assert rows[-12:, 0].tolist() == list(text[:12])  # the 12 text tokens end the prefill
    assert rows[-1, 1] == AUDIO_BOS
    voice = rows[:, 0] == loaded.ids.audio_pad
    assert int(voice.sum()) == 10 and bool((rows[voice, 1:] < AUDIO_PAD).all())  # the reference frames
    assert list(ref.outputs) == LAYERS
    assert all(ref.outputs[name].shape == (rows.shape[0], 32) for name in LAYERS)
    assert ref.options["reference_frames"] == 10
    same = compare_runs(ref, eager, "hidden")
    assert all(a.rel_l2 < 1e-5 for a in same.tensors.values())  # float32: eager and sdpa agree
    close = compare_runs(ref, bf16, "hidden")
    assert close.next_token is None and close.audio is None
    assert all(0 < a.rel_l2 < 0.05 for a in close.tensors.values())


def test_lm_part_teacher_forces_frames_as_the_engine_feeds_them(moss_tts_dir: Path) -> None:
    frames_n = 5
    (ref,) = _runs("moss-lm", str(moss_tts_dir), frames_n, RunConfig())
    rows, frames = ref.inputs["rows"], ref.inputs["frames"]
    prefill = int(ref.options["prefill_rows"])
    loaded = load_moss_lm(str(moss_tts_dir))
    job = MossPrompter(loaded.tokenizer, loaded.ids).job(PROMPT_TEXT, reference=None, max_frames=1)
    assert ref.options["reference_frames"] == REFERENCE_FRAMES
    assert rows.shape == (prefill + frames_n - 1, CODEBOOKS + 1) and frames.shape == (frames_n, CODEBOOKS)
    # step k >= 1: [the k-th remaining text id, frame k - 1]
    assert rows[prefill:, 0].tolist() == list(job.text_tail[: frames_n - 1])
    assert torch.equal(rows[prefill:, 1:], frames[:-1])
    assert list(ref.outputs) == [*LAYERS, *HEADS, "logits"]
    assert ref.outputs["logits"].shape == (frames_n * CODEBOOKS, 1024)
    assert torch.equal(ref.outputs["logits"][CODEBOOKS + 3], ref.outputs["local.head.03"][1])  # frame-major

    # the same logits, fed one row at a time with a cache and one sub-step at a time, as generation does
    model = loaded.model
    with torch.inference_mode():
        hidden, cache = model.backbone(rows[None, :prefill], None)
        states = [hidden[0]]
        for k in range(prefill, rows.shape[0]):
            hidden, cache = model.backbone(rows[None, k : k + 1], cache)
            states.append(hidden[0])
        local = model.local_transformer
        for f, state in enumerate(states):
            local_cache, x = local.new_cache(1), state[None]
            for i in range(CODEBOOKS):
                if i:
                    x = local.embed(i, frames[f, i - 1 : i])
                logits = local.step(i, x, local_cache)[0, :1024]
                torch.testing.assert_close(logits, ref.outputs[HEADS[i]][f], rtol=1e-4, atol=1e-4)


def test_lm_part_bf16_and_float32_attention_agree_closely(moss_tts_dir: Path) -> None:
    ref, bf16, fp32_attention = _runs(
        "moss-lm",
        str(moss_tts_dir),
        6,
        RunConfig(),
        RunConfig(dtype="bfloat16"),
        RunConfig("cpu", "bfloat16", "sdpa_fp32"),
    )
    for test in (bf16, fp32_attention):
        comparison = compare_runs(ref, test, "lm")
        assert comparison.next_token is not None and comparison.next_token.positions == 6 * CODEBOOKS
        assert comparison.next_token.top1_agreement > 0.8
        assert all(0 < comparison.tensors[name].rel_l2 < 0.05 for name in [*LAYERS, *HEADS])


def test_cli_runs_both_moss_lm_parts_with_limits(
    moss_tts_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lm = ["moss-lm", "--source", str(moss_tts_dir), "--length", "3", "--test", "cpu,bfloat16"]
    assert main([*lm, "--min-top1", "0.5", "--save-dir", str(tmp_path), "--json", "-"]) == EXIT_PASS
    report = json.loads(capsys.readouterr().out)
    assert report["comparisons"][0]["next_token"]["positions"] == 3 * CODEBOOKS
    saved = tmp_path / "moss-lm-cpu-bf16-sdpa.safetensors"
    again = ["moss-lm", "--ref", str(tmp_path / "moss-lm-cpu-fp32-sdpa.safetensors"), "--test", str(saved)]
    assert main([*again, "--json", "-"]) == EXIT_PASS
    assert (
        json.loads(capsys.readouterr().out)["comparisons"][0]["tensors"]
        == report["comparisons"][0]["tensors"]
    )
    backbone = ["moss-backbone", "--source", str(moss_tts_dir), "--length", "4", "--test", "cpu,bfloat16"]
    assert main([*backbone, "--min-cosine", "0.99", "--json", "-"]) == EXIT_PASS
    report = json.loads(capsys.readouterr().out)
    assert "next_token" not in report["comparisons"][0] and "audio" not in report["comparisons"][0]
    assert main([*backbone, "--max-rel-l2", "0"]) == EXIT_FAIL
