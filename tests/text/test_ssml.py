"""The SSML parser and planner on their own: pieces, caps, and the segments a document becomes."""

from __future__ import annotations

import pytest

from app.core.errors import InvalidRequest
from app.text.lexicon import Pronouncer, parse_entries
from app.text.normalizer import normalize_spoken_mode
from app.text.speech_plan import Pause, Speak, plan_input
from app.text.ssml import SsmlLimits, is_ssml, parse_ssml


async def spoken(text: str, language: str) -> str:
    return normalize_spoken_mode(text, language)


async def plan(document: str, *pairs: tuple[str, str], language: str = "auto") -> tuple[object, ...]:
    lexicon = Pronouncer([parse_entries([{"grapheme": g, "alias": a} for g, a in pairs])] if pairs else [])
    made = await plan_input(
        document,
        pronouncer=lexicon,
        language=language,
        normalize=spoken,
        limits=SsmlLimits(),
        max_text_chars=4096,
    )
    return made.items


def test_what_counts_as_ssml() -> None:
    assert (
        is_ssml("<speak>hi</speak>")
        and is_ssml('  <?xml version="1.0"?><speak/>')
        and is_ssml("<!DOCTYPE x>")
    )
    assert not is_ssml("<b>bold</b>") and not is_ssml("speak <speak>") and not is_ssml("<speaker>")


async def test_breaks_rates_and_lexicons_make_segments() -> None:
    items = await plan(
        '<speak xml:lang="ms">Baki RM5 di Jln. 2<break time="300ms"/><break time="0.2s"/>'
        '<prosody rate="x-slow">perlahan</prosody><break/></speak>',
        ("Jln.", "Jalan"),
    )
    assert items == (
        Speak("Baki lima ringgit di Jalan dua"),
        Pause(500),
        Speak("perlahan", 0.5),
        Pause(500),
    )


async def test_a_document_with_nothing_to_speak_is_a_400() -> None:
    with pytest.raises(InvalidRequest, match="nothing speakable"):
        await plan('<speak><break time="1s"/>...</speak>')


@pytest.mark.parametrize(
    ("document", "limits", "message"),
    [
        ("<speak>" + "<s>" * 40 + "</s>" * 40 + "</speak>", SsmlLimits(), "deeper than 32"),
        ("<speak>" + "<break/>" * 101 + "</speak>", SsmlLimits(), "more than 100 breaks"),
        ('<speak><break time="40s"/><break time="21s"/></speak>', SsmlLimits(), "more than 60 s"),
        ("<speak>" + "<sub>a</sub>" * 20 + "</speak>", SsmlLimits(max_elements=10), "more than 10 elements"),
        ("<speak>" + "a" * 100 + "</speak>", SsmlLimits(max_chars=50), "longer than 50"),
        ('<speak><break time="soon"/></speak>', SsmlLimits(), "like 700ms"),
        ('<speak><prosody rate="fastest">a</prosody></speak>', SsmlLimits(), "prosody rate"),
        ("<voice><speak/></voice>", SsmlLimits(), "root element must be <speak>"),
    ],
)
def test_caps_and_bad_values_are_400(document: str, limits: SsmlLimits, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        parse_ssml(document, limits)


def test_unknown_elements_and_attributes_are_read_as_text_and_named() -> None:
    document = parse_ssml(
        '<speak><voice name="x"><mark name="m"/>hi <say-as interpret-as="expletive">damn</say-as></voice>'
        '<lang xml:lang="fr">oui</lang></speak>',
        SsmlLimits(),
    )
    assert document.ignored == ["voice", "mark", "say-as interpret-as=expletive", "lang xml:lang=fr"]
    assert "".join(getattr(item, "text", "") for item in document.items) == "hi damnoui"
