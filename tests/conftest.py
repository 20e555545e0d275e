"""Suite-wide setup: no settings leak in from the environment or a local .env file."""

from __future__ import annotations

import os

from app.config import Settings


def pytest_configure() -> None:
    for name in Settings.model_fields:
        os.environ.pop(name, None)
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing in the suite may reach a hub
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


def make_settings(**overrides: object) -> Settings:
    """Settings from defaults plus ``overrides``, ignoring any ``.env`` file."""
    return Settings(_env_file=None, **overrides)  # type: ignore[arg-type]
