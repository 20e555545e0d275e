"""Settings: every environment variable the server reads, typed, validated and documented.

``Settings`` composes the shared settings (``app.core.settings.ServerSettings``) with each registered
family's own settings class (``app.families.registry``), so a new family's settings need no edit here.
One ``Settings`` object is built by ``create_app`` (or by the caller, in tests) and handed down; a family
reads its own fields through its class (``NeuCodecSettings.of(settings)``). ``.env_example`` lists every
field (a test keeps them in step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import create_model, model_validator

from app.core.family import FamilySpec
from app.core.settings import ServerSettings
from app.families.registry import specs


def compose(families: Sequence[FamilySpec]) -> type[ServerSettings]:
    """One settings class holding the shared fields and every family's; MODEL_FAMILIES may name only
    these families."""
    names = [spec.name for spec in families]

    def check_families(settings: ServerSettings) -> ServerSettings:
        unknown = [name for name in settings.MODEL_FAMILIES if name not in names]
        if unknown or not settings.MODEL_FAMILIES:
            raise ValueError(
                f"MODEL_FAMILIES names {', '.join(unknown) or 'no family'}: choose from {', '.join(names)}"
            )
        return settings

    bases = tuple(spec.settings for spec in reversed(families)) or (ServerSettings,)
    validator: Any = model_validator(mode="after")(check_families)  # pydantic's decorator proxy
    return create_model(
        "Settings",
        __base__=bases,
        __module__=__name__,
        __doc__="The server's configuration: the shared settings and each registered family's.",
        __validators__={"check_families": validator},
    )


Settings = compose(specs())
