"""The model families this server can load, one line each: a family is its package under
``app/families/`` (whose ``SPEC`` says what it is) and its line here."""

from __future__ import annotations

from importlib import import_module

from app.core.family import FamilySpec

REGISTERED = (
    "app.families.neucodec",
    "app.families.moss",
)


def specs() -> tuple[FamilySpec, ...]:
    """Every registered family's spec, in the order above (importing a family's package is cheap: its
    settings class and its spec, nothing else)."""
    return tuple(import_module(package).SPEC for package in REGISTERED)
