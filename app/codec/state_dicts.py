"""Strict checkpoint loading: what is wrong between a model's parameters and a checkpoint's tensors."""

from __future__ import annotations

import torch

SHOWN_KEYS = 8
"""Keys named in a message before the rest is counted."""


def _listing(keys: list[str]) -> str:
    shown = ", ".join(keys[:SHOWN_KEYS])
    return shown + (f", ... ({len(keys)} in all)" if len(keys) > SHOWN_KEYS else "")


def layout_problems(model: torch.nn.Module, state: dict[str, torch.Tensor], part: str = "") -> list[str]:
    """The missing, unexpected and mis-shaped keys of ``state`` against ``model`` (empty: they fit)."""
    expected = model.state_dict()
    keys = f"{part} keys" if part else "keys"
    problems = []
    missing = sorted(set(expected) - set(state))
    if missing:
        problems.append(f"missing {keys}: {_listing(missing)}")
    unexpected = sorted(set(state) - set(expected))
    if unexpected:
        problems.append(f"unexpected {keys}: {_listing(unexpected)}")
    mismatched = [
        f"{key} {tuple(state[key].shape)} != {tuple(expected[key].shape)}"
        for key in sorted(set(state) & set(expected))
        if state[key].shape != expected[key].shape
    ]
    if mismatched:
        problems.append(f"wrong shapes (checkpoint != config): {_listing(mismatched)}")
    return problems
