"""The voice catalogue: configured voices plus aliases (the OpenAI voice names), resolved strictly.

An unknown voice is a 400 naming the valid ones; it is never silently replaced by the default and
never reaches the prompt raw (it is interpolated into ``<|im_start|>{voice}: ...``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from app.core.errors import InvalidRequest, echo

OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "onyx",
    "nova", "sage", "shimmer", "verse", "marin", "cedar",
)  # fmt: skip
"""OpenAI's voice names: each family answers to them as aliases of its own voices."""


@dataclass(frozen=True)
class VoiceCatalog:
    """Voices the LM was trained on, the default one, and alias -> voice."""

    voices: tuple[str, ...]
    default: str
    aliases: dict[str, str] = field(default_factory=dict)

    def resolve(self, name: str | None, others: Iterable[str] = ()) -> str:
        """The configured voice for ``name`` (a voice or alias; None = default). Raises InvalidRequest,
        whose message lists the valid voices and ``others`` (e.g. registered voices)."""
        if name is None:
            return self.default
        if name in self.voices:
            return name
        if name in self.aliases:
            return self.aliases[name]
        valid = ", ".join([*self.voices, *self.aliases, *others])
        raise InvalidRequest(
            f"Voice {echo(name)} is not available. Valid voices: {valid}.",
            param="voice",
            code="voice_not_found",
        )

    def aliases_of(self, voice: str) -> list[str]:
        """The aliases that resolve to ``voice``."""
        return [alias for alias, target in self.aliases.items() if target == voice]

    def names(self) -> list[str]:
        """Every name ``resolve`` accepts: voices and aliases."""
        return [*self.voices, *self.aliases]
