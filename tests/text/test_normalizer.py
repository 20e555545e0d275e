"""TextNormalizer: mode dispatch, llm fallbacks on the speech path, errors off it, thread offload."""

from __future__ import annotations

import re
import threading

import pytest

from app.core.errors import InvalidRequest
from app.text import normalizer as normalizer_module
from app.text.llm import LLMNormalizer, LLMNormalizerError
from app.text.normalizer import LANGUAGES, MODES, NormalizeResult, TextNormalizer
from tests.fakes.fake_openai import ChatScript, FakeOpenAI


def fake_spoken(text: str, language: str = "auto") -> str:
    """Stands in for the verbalizer where only the dispatch is under test."""
    return f"spoken[{language}]:{text}"


@pytest.fixture
def stub_spoken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(normalizer_module, "normalize_spoken", fake_spoken)


def test_modes_and_languages() -> None:
    assert MODES == ("rule", "spoken", "llm")
    assert LANGUAGES == ("auto", "en", "ms", "zh", "ta")


async def test_rule_mode() -> None:
    result = await TextNormalizer(None).normalize(
        "**Hello!!** How are you?", "rule", False, "auto", None, False
    )
    assert result == NormalizeResult("Hello! How are you?", "rule", None)


async def test_spoken_mode_cleans_first(stub_spoken: None) -> None:
    result = await TextNormalizer(None).normalize("**RM5** now!!", "spoken", False, "ms", None, False)
    assert result == NormalizeResult("spoken[ms]:RM5 now!", "spoken", None)


async def test_spoken_mode_reads_every_digit() -> None:
    result = await TextNormalizer(None).normalize(
        "Your total is RM1,250.50 on 12/9/2026.", "spoken", False, "auto", None, False
    )
    assert result.mode_used == "spoken"
    assert not re.search(r"\d", result.output)


async def test_llm_mode(fake: FakeOpenAI, llm: LLMNormalizer) -> None:
    result = await TextNormalizer(llm).normalize(
        "**Bayar RM5 sekarang!!!**", "llm", False, "ms", "Be brief.", False
    )
    assert result == NormalizeResult("Bayar lima ringgit sekarang!", "llm", None)
    [request] = fake.requests
    assert request.user_text == "Bayar RM5 sekarang!"
    assert "This text is in Malay" in request.system_text
    assert request.system_text.endswith("Be brief.")


async def test_llm_reply_is_cleared_of_controls_and_invisible_characters(
    fake: FakeOpenAI, llm: LLMNormalizer
) -> None:
    """The chat model's reply is untrusted text too: what it adds never reaches the speech LM."""
    fake.script = ChatScript(content='{"normalized": "Bayar\\u0000 lima\\u200b ringgit\\u202e sekarang!"}')
    result = await TextNormalizer(llm).normalize("Bayar RM5 sekarang!!!", "llm", False, "ms", None, True)
    assert result == NormalizeResult("Bayar  lima ringgit sekarang!", "llm", None)


async def test_llm_unconfigured_is_a_400_on_the_normalize_endpoint() -> None:
    with pytest.raises(InvalidRequest) as caught:
        await TextNormalizer(None).normalize("RM5", "llm", False, "auto", None, False)
    assert caught.value.status == 400
    assert caught.value.param == "mode"


async def test_llm_unconfigured_falls_back_to_spoken_for_speech(stub_spoken: None) -> None:
    result = await TextNormalizer(None).normalize("**RM5**", "llm", False, "en", None, True)
    assert result == NormalizeResult("spoken[en]:RM5", "spoken", "unconfigured")


async def test_llm_failure_is_a_502_on_the_normalize_endpoint(fake: FakeOpenAI, llm: LLMNormalizer) -> None:
    fake.script = ChatScript(status=500)
    with pytest.raises(LLMNormalizerError) as caught:
        await TextNormalizer(llm).normalize("RM5", "llm", False, "auto", None, False)
    assert caught.value.status == 502


async def test_llm_failure_falls_back_to_spoken_for_speech(
    fake: FakeOpenAI, llm: LLMNormalizer, stub_spoken: None
) -> None:
    fake.script = ChatScript(status=500)
    result = await TextNormalizer(llm).normalize("**RM5**", "llm", False, "ms", None, True)
    assert result == NormalizeResult("spoken[ms]:RM5", "spoken", "error")


async def test_llm_timeout_falls_back_to_spoken_for_speech(fake: FakeOpenAI, stub_spoken: None) -> None:
    fake.script = ChatScript(delay_s=1.0)
    client = LLMNormalizer(fake.url, fake.api_key, fake.model, timeout_s=0.1)
    await client.start()
    try:
        result = await TextNormalizer(client).normalize("RM5", "llm", False, "auto", None, True)
    finally:
        await client.close()
    assert result == NormalizeResult("spoken[auto]:RM5", "spoken", "error")


async def test_llm_skips_plain_text(fake: FakeOpenAI, llm: LLMNormalizer) -> None:
    result = await TextNormalizer(llm).normalize(
        "Hello there, how are you?", "llm", False, "auto", None, False
    )
    assert result == NormalizeResult("Hello there, how are you?", "llm", None)
    assert fake.requests == []


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"mode": "fancy"}, "mode"),
        ({"language": "fr"}, "language"),
        ({"language": "EN"}, "language"),
        ({"prompt": "x" * 2001}, "prompt"),
    ],
)
async def test_invalid_arguments_are_400s(kwargs: dict[str, str], param: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        await TextNormalizer(None).normalize("text", **kwargs)
    assert caught.value.param == param


def test_negative_offload_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="offload_chars"):
        TextNormalizer(None, offload_chars=-1)


@pytest.mark.parametrize(
    ("mode", "function"),
    [
        ("rule", "normalize_rule"),
        ("spoken", "normalize_spoken_mode"),
        ("llm", "clean"),
        ("llm", "normalize_spoken"),
    ],
)
async def test_long_texts_run_in_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch, llm: LLMNormalizer, fake: FakeOpenAI, mode: str, function: str
) -> None:
    """Above ``offload_chars`` the CPU-bound step runs off the event loop's thread (also the fallback)."""
    threads: list[int] = []

    def record(text: str, *_args: object, **_kwargs: object) -> str:
        threads.append(threading.get_ident())
        return text

    monkeypatch.setattr(normalizer_module, function, record)
    if function == "normalize_spoken":
        fake.script = ChatScript(status=500)  # the llm fails: the spoken fallback runs
    normalizer = TextNormalizer(llm, offload_chars=10)
    await normalizer.normalize("RM5 short", mode, False, "auto", None, True)
    await normalizer.normalize("RM5 and a longer text", mode, False, "auto", None, True)
    loop_thread = threading.get_ident()
    assert threads == [loop_thread, threads[1]]
    assert threads[1] != loop_thread


async def test_long_text_result_is_the_same_offloaded_or_not() -> None:
    text = "**Hello!!** Call *now*—it's 50% off. " * 100
    inline = await TextNormalizer(None, offload_chars=10**9).normalize(text, "rule")
    offloaded = await TextNormalizer(None, offload_chars=100).normalize(text, "rule")
    assert inline == offloaded
