"""Planning: a request's options resolved once into one plan that the family, the post stages, the
response shape and the spans all read."""

from __future__ import annotations

from typing import Any

from app.api.schemas import SpeechRequest
from app.core.family import ModelFamily
from app.families.registry import specs
from app.families.shared.long_input import part_seed
from app.interleave.service import Interleave
from app.observability.metrics import Metrics
from app.synthesis.engine import build_family
from app.synthesis.planning import Conversation, plan_request
from app.text.speech_plan import Speak, SpokenPlan
from tests.conftest import make_settings


def neucodec(**overrides: object) -> tuple[Any, ModelFamily]:
    """Settings and the NeuCodec family built from them (the http backend: nothing loads)."""
    settings = make_settings(LM_BACKEND="http", **overrides)
    spec = next(spec for spec in specs() if spec.name == "neucodec")
    return settings, build_family(spec, settings, Interleave(settings, None), Metrics())


def spoken(text: str) -> SpokenPlan:
    """A plain text's plan: one segment at the request's rate."""
    return SpokenPlan((Speak(text),))


def test_every_default_is_resolved_once_from_the_settings_and_the_family() -> None:
    settings, family = neucodec(DEFAULT_SPEAKING_RATE=1.25, STREAM_NORMALIZE=False, DEFAULT_MAX_TOKENS=700)
    request = SpeechRequest(input="Hello.", response_format="mp3", stream_format="sse")
    plan = plan_request(settings, family, request, spoken("Hello."), "husein")
    assert plan.family is family
    assert (plan.post.response_format, plan.post.stream, plan.stream_format) == ("mp3", True, "sse")
    assert (plan.post.speaking_rate, plan.post.normalize) == (1.25, False)
    assert plan.job.sampling.max_tokens == 700 and plan.job.model == "TTS-model"
    assert plan.attributes["speaking_rate"] == 1.25 and plan.attributes["stream_normalize"] is False
    assert plan.headers() == {}


def test_the_request_wins_over_the_defaults() -> None:
    settings, family = neucodec()
    request = SpeechRequest(input="Hi.", speed=0.8, stream_normalize=True, max_tokens=42, temperature=0.2)
    plan = plan_request(settings, family, request, spoken("Hi."), "idayu")
    assert plan.post.speaking_rate == 0.8 and plan.post.normalize is True
    assert (plan.job.sampling.max_tokens, plan.job.sampling.temperature) == (42, 0.2)


def test_a_conversation_is_stored_under_its_key_and_echoed_under_its_name() -> None:
    settings, family = neucodec()
    request = SpeechRequest(input="Hi.")
    plan = plan_request(
        settings, family, request, spoken("Hi."), "husein", Conversation("my chat ✓", "tenant/my chat ✓")
    )
    assert plan.job.interleave_id == "tenant/my chat ✓"
    assert plan.headers() == {"X-Interleave-Id": "my%20chat%20%E2%9C%93"}


def test_ssml_segments_get_their_own_seeds_and_what_was_ignored_is_said() -> None:
    settings, family = neucodec()
    request = SpeechRequest(input="<speak>...</speak>", seed=5)
    plan = plan_request(
        settings, family, request, SpokenPlan((Speak("One."), Speak("Two.")), True, ("voice",)), "husein"
    )
    assert plan.job.text == "One. Two."
    assert [plan.segment_job("One.", 0).sampling.seed, plan.segment_job("Two.", 1).sampling.seed] == [
        5,
        part_seed(5, 1),
    ]
    assert plan.headers() == {"X-SSML-Ignored": "voice"} and plan.ignored == ("voice",)
