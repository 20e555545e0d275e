"""The engine's side of ``app.text.speech_plan.plan_input``: a request's text (or SSML) and lexicons to
the segments and pauses it will be spoken as, normalized with the request's options and the settings.

``spoken_plan`` is what the speech and voice-conversion requests and ``/v1/audio/normalize`` call; a
streaming session calls it the same way per message (its text options, the lexicon names it was given,
and its voice's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from app.core.family import ModelFamily
from app.core.settings import ServerSettings
from app.core.types import Language, NormalizerMode
from app.synthesis.engine import Engine
from app.synthesis.planning import TextFields, normalize_text
from app.text.clean import clean_text
from app.text.speech_plan import SpokenPlan, plan_input
from app.text.ssml import SsmlLimits


@dataclass(frozen=True)
class _Options:
    """A request's text options with the language of one span of its SSML."""

    mode: NormalizerMode | None
    normalize_malaysian: bool | None
    language: Language
    prompt: str | None


@dataclass
class PlannedText:
    """A plan and the normalizer mode that made it (the last one used, for ``/v1/audio/normalize``)."""

    plan: SpokenPlan
    mode_used: NormalizerMode = "rule"


def ssml_limits(settings: ServerSettings) -> SsmlLimits:
    return SsmlLimits(
        max_chars=settings.SSML_MAX_CHARS,
        max_depth=settings.SSML_MAX_DEPTH,
        max_elements=settings.SSML_MAX_ELEMENTS,
        max_breaks=settings.SSML_MAX_BREAKS,
        max_break_ms=round(settings.SSML_MAX_BREAK_S * 1000),
    )


async def voice_lexicons(engine: Engine, family: ModelFamily, name: str | None) -> tuple[str, ...]:
    """The lexicons attached to the registered voice ``name`` (none for a built-in voice)."""
    if name is None or name in family.voices.names():
        return ()
    voice = await engine.registry.get(name)
    return voice.lexicons if voice is not None else ()


async def spoken_plan(
    engine: Engine,
    text: str,
    options: TextFields,
    param: str,
    lexicons: Sequence[str] = (),
    voice: Sequence[str] = (),
    for_speech: bool = True,
) -> PlannedText:
    """``text`` as segments and pauses: the ``lexicons`` the request names, then ``voice``'s, then the
    server's, before normalization (see ``app.text.speech_plan``). For speech, each segment is also
    cleaned of special-token markup as the LM will see it."""
    settings = engine.settings
    pronouncer = await engine.lexicons.pronouncer(lexicons, voice)
    planned = PlannedText(SpokenPlan(()))

    async def normalize(piece: str, language: str) -> str:
        span = _Options(options.mode, options.normalize_malaysian, cast(Language, language), options.prompt)
        result = await normalize_text(engine, piece, span, for_speech)
        planned.mode_used = result.mode_used
        return clean_text(result.output) if for_speech else result.output

    planned.plan = await plan_input(
        text,
        pronouncer=pronouncer,
        language=options.language,
        normalize=normalize,
        limits=ssml_limits(settings),
        max_text_chars=settings.MAX_INPUT_CHARS,
        param=param,
    )
    return planned
