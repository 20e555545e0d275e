"""The Engine: the loaded model families, the text normalizer, the voice and lexicon registries and the
turn store.

Built once in the lifespan of ``create_app`` (``start``) and closed at shutdown (``close``); routes
reach it through ``request.app.state.engine``. Nothing here runs at import. ``MODEL_FAMILIES`` names
the families to load (from ``app.families.registry``); the first is the default, which also answers to
OpenAI's model names.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import import_module

from app.core.errors import InvalidRequest, NotFound, echo
from app.core.family import OPENAI_MODELS, FamilySpec, ModelFamily, openai_model
from app.core.settings import ServerSettings
from app.families.registry import specs
from app.interleave.service import Interleave
from app.observability.metrics import Metrics
from app.synthesis.lexicons import LexiconRegistry
from app.synthesis.registry import VoiceRegistry
from app.synthesis.voice_stores.factory import build_lexicon_store, build_voice_store
from app.text.lexicon import LexiconLimits
from app.text.llm import LLMNormalizer
from app.text.normalizer import TextNormalizer

log = logging.getLogger(__name__)


def build_family(
    spec: FamilySpec, settings: ServerSettings, interleave: Interleave, metrics: Metrics
) -> ModelFamily:
    """The family ``spec`` describes, built from its own view of ``settings`` (imported only now)."""
    module, _, name = spec.family.partition(":")
    family: ModelFamily = getattr(import_module(module), name)(
        spec.settings.of(settings), interleave, metrics
    )
    return family


def build_normalizer(settings: ServerSettings) -> TextNormalizer:
    """The text normalizer; its llm mode only when OPENAI_BASE_URL and OPENAI_MODEL_NAME are set."""
    llm = None
    if settings.OPENAI_BASE_URL and settings.OPENAI_MODEL_NAME:
        llm = LLMNormalizer(
            settings.OPENAI_BASE_URL,
            settings.OPENAI_API_KEY,
            settings.OPENAI_MODEL_NAME,
            settings.OPENAI_TIMEOUT,
            skip_plain=settings.LLM_NORMALIZER_SKIP_PLAIN,
        )
    return TextNormalizer(llm, offload_chars=settings.NORMALIZE_OFFLOAD_CHARS)


def build_lexicons(settings: ServerSettings) -> LexiconRegistry:
    """The registered lexicons (in the voice store) and the server-wide one (LEXICON_PATH)."""
    return LexiconRegistry(
        build_lexicon_store(settings),
        settings.MAX_LEXICONS,
        LexiconLimits(max_entries=settings.MAX_LEXICON_ENTRIES),
        settings.LEXICON_PATH,
    )


@dataclass
class Engine:
    """Long-lived state of one server process."""

    settings: ServerSettings
    families: list[ModelFamily]
    normalizer: TextNormalizer
    registry: VoiceRegistry
    interleave: Interleave
    lexicons: LexiconRegistry
    metrics: Metrics = field(default_factory=Metrics)

    @classmethod
    def from_settings(
        cls,
        settings: ServerSettings,
        metrics: Metrics | None = None,
        registered: Sequence[FamilySpec] | None = None,
    ) -> Engine:
        """The engine with the families MODEL_FAMILIES names among ``registered`` (the registry's unless
        given), built, not started."""
        metrics = metrics if metrics is not None else Metrics()
        interleave = Interleave.from_settings(settings, metrics)
        by_name = {spec.name: spec for spec in (specs() if registered is None else registered)}
        families = [
            build_family(by_name[name], settings, interleave, metrics) for name in settings.MODEL_FAMILIES
        ]
        reserved = [name for family in families for name in family.voices.names()]
        registry = VoiceRegistry.of(build_voice_store(settings), settings.MAX_REGISTERED_VOICES, reserved)
        lexicons = build_lexicons(settings)
        return cls(settings, families, build_normalizer(settings), registry, interleave, lexicons, metrics)

    @property
    def default(self) -> ModelFamily:
        """The default family: the first loaded one."""
        return self.families[0]

    def model_ids(self) -> list[str]:
        """Every served model id, the default family's first, then OpenAI's names (default family)."""
        return [model for family in self.families for model in family.model_ids()] + list(OPENAI_MODELS)

    def family_for(self, model: str | None) -> ModelFamily:
        """The family serving ``model`` (None and OpenAI's names: the default). NotFound otherwise."""
        if model is None or openai_model(model):
            return self.default
        for family in self.families:
            if model in family.model_ids():
                return family
        raise NotFound(f"The model {echo(model)} does not exist.", param="model", code="model_not_found")

    def require(
        self, family: ModelFamily, *, reference_voice: bool = False, multi_turn: bool = False
    ) -> None:
        """400 naming each capability the request needs and ``family`` lacks."""
        lacking = family.capabilities.lacking(reference_voice=reference_voice, multi_turn=multi_turn)
        if lacking:
            models = ", ".join(family.model_ids())
            raise InvalidRequest(
                f"The model {models} does not support {' and '.join(lacking)}.",
                param="model",
                code="unsupported_capability",
            )

    async def start(self) -> None:
        """Start every family, then read the registered voices and start the llm normalizer."""
        for family in self.families:
            log.info("starting model family %s (%s)", family.name, ", ".join(family.model_ids()))
            await family.start()
        await self.registry.start()
        await self.lexicons.start()
        if self.normalizer.llm is not None:
            await self.normalizer.llm.start()

    async def close(self) -> None:
        """Close every family and the llm normalizer; safe after a failed start."""
        for family in reversed(self.families):
            await family.close()
        await self.registry.close()
        await self.lexicons.close()
        if self.normalizer.llm is not None:
            await self.normalizer.llm.close()

    def details(self) -> dict[str, object]:
        """The families' startup choices: the default family's as they are, the others' under their name."""
        details: dict[str, object] = {}
        for family in self.families:
            if family is self.default:
                details.update(family.details())
            elif family.details():
                details[family.name] = family.details()
        return details

    async def ready(self) -> dict[str, bool]:
        """Readiness of each part of each family (``codec``, ``lm`` for the default one; others are
        prefixed with their family's name)."""
        checks: dict[str, bool] = {}
        for family in self.families:
            prefix = "" if family is self.default else f"{family.name}."
            checks.update({prefix + part: ok for part, ok in (await family.ready()).items()})
        return checks
