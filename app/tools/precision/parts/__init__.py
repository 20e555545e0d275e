"""The parts the precision tool can run, by name: every registered family's (its ``precision`` module's
``PARTS``), in the registry's order."""

from __future__ import annotations

from importlib import import_module

from app.families.registry import specs
from app.families.shared.precision_part import Part

PARTS: dict[str, Part] = {
    part.name: part
    for spec in specs()
    if spec.precision is not None
    for part in import_module(spec.precision).PARTS
}


def get_part(name: str) -> Part:
    """The part called ``name``; ValueError naming the known parts otherwise."""
    if name not in PARTS:
        raise ValueError(f"unknown part {name!r}: use one of {', '.join(PARTS)}")
    return PARTS[name]
