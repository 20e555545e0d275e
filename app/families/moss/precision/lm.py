"""MOSS-TTS-Realtime's LM (``app.families.moss.lm``) as two precision parts, on the rows the server feeds it.

Both start from the prefill ``MossPrompter.job`` builds for a fixed sentence (its first 12 text tokens, the
rest fed with later steps) in the voice of ``REFERENCE_FRAMES`` seeded random reference frames: the system
prompt, the voice block with the reference codes, the assistant prefix and the 12 text rows, the last with
the audio BOS. Rows are ``[text_id, a1..a16]``.

``moss-backbone`` is the second seed's check: that prefill (``length`` reference frames) through the
backbone, one forward pass; outputs each layer's output hidden states ``backbone.layer.NN`` ``[rows,
hidden]`` and the final norm ``backbone.norm``.

``moss-lm`` adds ``length`` teacher-forced frames of seeded random codes: row ``k >= 1`` is ``[the k-th
remaining text id (then <|text_pad|>), frame k-1]`` as the engine feeds it, so the backbone's normed hidden
state of the last prefill row predicts frame 0 and that of row ``k`` frame ``k``. The local transformer
then runs its 16 sub-steps on those hidden states, forced with the frames' own codes (sub-step ``i`` is fed
codebook ``i - 1``'s code). Outputs: the backbone's layers and norm over all rows, each head's logits over
the 1024 codes ``local.head.NN`` ``[frames, 1024]`` (pad and BOS, never sampled, and EOS, head 0 only, are
left out) and ``logits`` ``[frames * 16, 1024]`` (frame-major), whose next-code checks are the tool's
next-token ones: one position per frame and codebook.

Sources: a checkpoint directory or Hugging Face id in the official layout (with its tokenizer). The dtype
and attention are the loader's (``sdpa_fp32``: float32 attention in the backbone and local transformer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from app.core.device import resolve_device, set_current
from app.families.moss.lm.types import CODE_VALUES, CODEBOOKS
from app.families.shared.precision_part import Kind, as_output, capture, release
from app.families.shared.run_config import RunConfig

PROMPT_TEXT = "The quick brown fox jumps over the lazy dog, then naps beside the river until noon."
REFERENCE_FRAMES = 64
"""Reference frames (5.1 s at 12.5 Hz) of the ``moss-lm`` part's voice block."""


def _prompt_rows(source: str, seed: int, reference_frames: int) -> tuple[np.ndarray, tuple[int, ...], int]:
    """The prefill rows ``(T, 17)`` for ``PROMPT_TEXT`` with seeded random reference codes, the text ids
    left for later steps, and the text-pad id; only the tokenizer and config of ``source`` are read."""
    from transformers import AutoTokenizer

    from app import hub
    from app.families.moss.lm.config import read_config
    from app.families.moss.lm.loader import HUB_PATTERNS, REQUIRED, special_ids
    from app.families.moss.lm.prompt import MossPrompter

    directory = hub.resolve(source, HUB_PATTERNS, REQUIRED)
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    ids = special_ids(tokenizer, read_config(Path(directory)))
    generator = torch.Generator().manual_seed(seed)
    reference = torch.randint(0, CODE_VALUES, (reference_frames, CODEBOOKS), generator=generator)
    job = MossPrompter(tokenizer, ids).job(PROMPT_TEXT, reference=reference.numpy(), max_frames=1)
    return job.prefill, job.text_tail, ids.text_pad


def _load(source: str, config: RunConfig) -> Any:
    from app.families.moss.lm.loader import load_moss_lm

    return load_moss_lm(source, device=config.device, dtype=config.dtype, attention=config.attention)


def _backbone_modules(model: Any) -> dict[str, torch.nn.Module]:
    layers = model.language_model.layers
    modules: dict[str, torch.nn.Module] = {f"backbone.layer.{i:02d}": layer for i, layer in enumerate(layers)}
    modules["backbone.norm"] = model.language_model.norm
    return modules


class MossBackbonePart:
    """``moss-backbone``: see the module docstring."""

    name: ClassVar[str] = "moss-backbone"
    kind: ClassVar[Kind] = "hidden"
    description: ClassVar[str] = (
        "MOSS-TTS-Realtime backbone on the prefill (12 text tokens + reference codes): "
        "per-layer hidden states"
    )
    default_length: ClassVar[int] = REFERENCE_FRAMES

    def make_inputs(
        self, source: str, seed: int, length: int
    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        prefill, _tail, _pad = _prompt_rows(source, seed, length)
        return {"rows": torch.from_numpy(prefill)}, {"reference_frames": length, "seed": seed}

    def run(
        self, source: str, config: RunConfig, inputs: dict[str, torch.Tensor], options: dict[str, Any]
    ) -> dict[str, torch.Tensor]:
        device = resolve_device(config.device)
        set_current(device)
        model = _load(source, config).model
        modules = _backbone_modules(model)
        with torch.inference_mode(), capture(modules) as captured:
            model.language_model(inputs_embeds=model.embed(inputs["rows"].to(device)[None]), use_cache=False)
        outputs = {name: captured[name] for name in modules}
        del model
        release(device)
        return outputs


class MossLMPart:
    """``moss-lm``: see the module docstring."""

    name: ClassVar[str] = "moss-lm"
    kind: ClassVar[Kind] = "lm"
    description: ClassVar[str] = (
        "MOSS-TTS-Realtime LM, teacher-forced frames: backbone hidden states, the local transformer's "
        "16 heads' logits"
    )
    default_length: ClassVar[int] = 40

    def make_inputs(
        self, source: str, seed: int, length: int
    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        prefill, tail, text_pad = _prompt_rows(source, seed, REFERENCE_FRAMES)
        generator = torch.Generator().manual_seed(seed + 1)  # not the reference's codes
        frames = torch.randint(0, CODE_VALUES, (length, CODEBOOKS), generator=generator)
        steps = torch.full((length - 1, CODEBOOKS + 1), text_pad, dtype=torch.int64)
        steps[: len(tail), 0] = torch.tensor(tail[: length - 1], dtype=torch.int64)
        steps[:, 1:] = frames[:-1]
        rows = torch.cat([torch.from_numpy(prefill), steps])
        options = {"prefill_rows": len(prefill), "reference_frames": REFERENCE_FRAMES, "seed": seed}
        return {"rows": rows, "frames": frames}, options

    def run(
        self, source: str, config: RunConfig, inputs: dict[str, torch.Tensor], options: dict[str, Any]
    ) -> dict[str, torch.Tensor]:
        device = resolve_device(config.device)
        set_current(device)
        model = _load(source, config).model
        modules = _backbone_modules(model)
        rows, frames = inputs["rows"].to(device), inputs["frames"].to(device)
        first = int(options["prefill_rows"]) - 1  # its hidden state predicts frame 0
        local = model.local_transformer
        heads = []
        with torch.inference_mode(), capture(modules) as captured:
            hidden = model.language_model(inputs_embeds=model.embed(rows[None]), use_cache=False)
            x = hidden.last_hidden_state[0, first : first + frames.shape[0]]  # [frames, hidden]
            cache = local.new_cache(frames.shape[0])
            for i in range(frames.shape[1]):
                if i:
                    x = local.embed(i, frames[:, i - 1])
                heads.append(as_output(local.step(i, x, cache)[:, :CODE_VALUES], squeeze=False))
        outputs = {name: captured[name] for name in modules}
        outputs |= {f"local.head.{i:02d}": head for i, head in enumerate(heads)}
        outputs["logits"] = torch.stack(heads, 1).reshape(-1, CODE_VALUES)  # [frames * 16, codes]
        del model, hidden, cache
        release(device)
        return outputs
