"""Serving the tone family beside the default one: the registry with its line, the settings composed
from it, and an engine built from them (what a real family gets from ``app.families.registry``)."""

from __future__ import annotations

from pathlib import Path

from app.config import compose
from app.core.settings import ServerSettings
from app.families.registry import specs
from app.synthesis.engine import Engine
from tests.api.conftest import http_settings
from tests.fakes import tone
from tests.fakes.tone.family import MODEL, ToneFamily

REGISTERED = (*specs(), tone.SPEC)  # the registry with the tone family's line
ToneServerSettings = compose(REGISTERED)
ENV_BLOCK = Path(tone.__file__).parent / "env_example"


def tone_settings(codec_dir: Path, lm_url: str, **overrides: object) -> ServerSettings:
    """The default family over http plus the tone family, from one composed settings class."""
    settings: ServerSettings = http_settings(
        codec_dir, lm_url, of=ToneServerSettings, MODEL_FAMILIES="neucodec,tone", **overrides
    )
    return settings


def tone_engine(settings: ServerSettings) -> tuple[Engine, ToneFamily]:
    """The engine of ``settings`` from the registry with the tone family, and the tone family."""
    engine = Engine.from_settings(settings, registered=REGISTERED)
    family = engine.family_for(MODEL)
    assert isinstance(family, ToneFamily)
    return engine, family
