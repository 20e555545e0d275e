"""The in-process LM's output layer cut to the ids the sampling loop may pick, and the CPU weight layout.

**Speech head.** The TTS LM's vocabulary is about 217k ids (Qwen3's 152k text tokens plus the 65,536
speech tokens), but a step may only pick a speech code or a stop id. ``SpeechHead`` keeps those rows of
the output layer (gathered once, ``[A, H]``, A = 65,536 + the stop ids) and the engines run the model's
decoder and this head instead of the full ``lm_head``: on the 1.7B model's shape that is 70% less output
layer work per row (``bench/lm_batch_bench.py``: a float32 decode step of 8 rows 686 -> 604 ms on 2
vCPUs). The copy costs A x H weights (268 MB in float32, 134 MB in bf16, for the 1.7B model).

**CPU float32 layout.** ``layout_for_cpu`` stores every linear layer's float32 weight as its transpose
made contiguous (the same ``[out, in]`` tensor to torch, strided the other way). MKL's sgemm computes
``x @ W^T`` for a handful of rows much faster from that layout (measured on a 2048x6144 weight, 2 vCPUs:
8 rows 2.70 -> 1.83 ms, one row unchanged), and a batched decode step is exactly that product. bf16 goes
the other way (oneDNN prefers the original layout: 0.75 -> 1.13 ms), so only float32 weights move.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def transposed_layout(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` [N, K] with the same values, stored column-major (its transpose is contiguous)."""
    return weight.t().contiguous().t()


class SpeechHead(torch.nn.Module):
    """hidden ``[B, H]`` -> float32 logits ``[B, A]`` over ``allowed_ids`` (index = position there), the
    same values the model's own output layer gives for those ids (bias and final soft-capping included)."""

    def __init__(self, model: Any, allowed_ids: torch.Tensor) -> None:
        super().__init__()
        out = model.get_output_embeddings()
        weight = out.weight.detach().index_select(0, allowed_ids)
        on_cpu_fp32 = weight.device.type == "cpu" and weight.dtype == torch.float32
        self.weight = transposed_layout(weight) if on_cpu_fp32 else weight
        bias = getattr(out, "bias", None)
        self.bias = None if bias is None else bias.detach().index_select(0, allowed_ids)
        self.softcap: float | None = getattr(model.config, "final_logit_softcapping", None)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = F.linear(hidden, self.weight, self.bias).float()
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits


def layout_for_cpu(model: Any) -> None:
    """On a CPU in float32: every linear layer of the decoder in ``transposed_layout`` (in place)."""
    for module in model.get_decoder().modules():
        if not isinstance(module, torch.nn.Linear):
            continue
        weight = module.weight.data
        if weight.device.type == "cpu" and weight.dtype == torch.float32:
            module.weight.data = transposed_layout(weight)
