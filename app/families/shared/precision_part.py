"""What the precision tool needs from a model part, and how layer outputs are captured.

A part makes fixed inputs once (seeded, from the checkpoint's own vocabulary or codebook) and runs
them on a configuration, returning named output tensors in the order they are computed: float tensors
(activations, logits, audio) and integer ones (codes, compared by identical share). An ``lm``
part's outputs include ``logits`` ``[positions, vocab]``: the next-token logits at each position of
the teacher-forced continuation. A ``codec`` part's include ``audio`` and its options the
``sample_rate``. A ``hidden`` part's are compared tensor by tensor only. A model family adds
its parts by listing them in ``parts/__init__.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Literal, Protocol

import torch

from app.families.shared.run_config import RunConfig

RANDOM_PREFIX = "random:"
Kind = Literal["lm", "codec", "hidden"]
"""What a part's comparison adds to the per-tensor one: next-token checks, audio checks, or nothing."""


class Part(Protocol):
    """One model part the tool can run (a stateless object; all state is in the arguments)."""

    name: ClassVar[str]
    kind: ClassVar[Kind]
    description: ClassVar[str]
    default_length: ClassVar[int]
    """``--length`` when not given: LM continuation tokens, codec frames."""

    def make_inputs(
        self, source: str, seed: int, length: int
    ) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
        """Fixed inputs for ``source`` and the options a comparison needs (JSON-able)."""
        ...

    def run(
        self, source: str, config: RunConfig, inputs: dict[str, torch.Tensor], options: dict[str, Any]
    ) -> dict[str, torch.Tensor]:
        """Run the inputs on ``config``; outputs on the CPU in float32, in computation order."""
        ...


def as_output(tensor: torch.Tensor, squeeze: bool = True) -> torch.Tensor:
    """A captured tensor as the tool keeps it: float32 on the CPU, a batch dim of 1 dropped (``squeeze``;
    off for tensors with no batch dim, whose first dim may be 1)."""
    tensor = tensor.detach()
    if squeeze and tensor.dim() > 1 and tensor.shape[0] == 1:
        tensor = tensor[0]
    return tensor.to("cpu", torch.float32)


@contextmanager
def capture(modules: dict[str, torch.nn.Module], squeeze: bool = True) -> Iterator[dict[str, torch.Tensor]]:
    """Record the output of each named module (the first tensor of a tuple output) while inside, as
    ``as_output(..., squeeze)`` keeps it."""
    captured: dict[str, torch.Tensor] = {}
    handles = []
    for name, module in modules.items():

        def hook(_module: torch.nn.Module, _args: Any, output: Any, name: str = name) -> None:
            captured[name] = as_output(output[0] if isinstance(output, tuple) else output, squeeze)

        handles.append(module.register_forward_hook(hook))
    try:
        yield captured
    finally:
        for handle in handles:
            handle.remove()


def release(device: torch.device) -> None:
    """Return cached accelerator memory after a run (nothing on cpu)."""
    if device.type != "cpu":
        getattr(torch, device.type).empty_cache()
