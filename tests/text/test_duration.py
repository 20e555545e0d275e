"""speech_seconds: the slow-reader estimate per script, and real speech (espeak-ng) within it."""

from __future__ import annotations

import wave
from pathlib import Path

import pytest

from app.text.duration import speech_seconds, wide
from tests.speech_audio import espeak_wav
from tests.text.test_split import EN, MS, TA, ZH


def test_spaced_scripts_count_every_code_point_and_wide_ones_each_character() -> None:
    assert speech_seconds("a" * 95 + " " * 5) == pytest.approx(10.0)  # 10 per second, spaces included
    assert speech_seconds("你好世界。") == pytest.approx(5 / 2.5)  # the full-width mark is a pause
    assert speech_seconds("ok 你好") == pytest.approx(3 / 10 + 2 / 2.5)
    assert speech_seconds("சென்று") == pytest.approx(6 / 10)  # Tamil: letters and vowel signs alike
    assert speech_seconds("abc", chars_per_s=3.0) == pytest.approx(1.0)
    assert speech_seconds("") == 0.0
    assert wide("。") and wide("한") and wide("か") and not wide("a") and not wide("ச")


@pytest.mark.parametrize(("voice", "text"), [("en", EN), ("ms", MS), ("ta", TA), ("cmn", ZH)])
def test_real_speech_takes_no_longer_than_the_estimate(voice: str, text: str, tmp_path: Path) -> None:
    """espeak-ng at its default pace (175 words a minute; slow in Mandarin) stays within the estimate,
    so a part sized by it is not cut by max_tokens."""
    path = espeak_wav(tmp_path / "speech.wav", text, voice)
    with wave.open(str(path)) as spoken:
        seconds = spoken.getnframes() / spoken.getframerate()
    assert 0.5 < seconds <= speech_seconds(text)
