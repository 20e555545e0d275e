"""VoiceCatalog: strict resolution with aliases; an unknown voice is a 400 that lists the valid ones."""

from __future__ import annotations

import pytest

from app.core.errors import InvalidRequest
from app.families.neucodec.family import builtin_voices
from tests.conftest import make_settings


def test_resolve_voice_alias_and_default() -> None:
    voices = builtin_voices(make_settings())
    assert voices.resolve(None) == "husein"
    assert voices.resolve("idayu") == "idayu"
    assert voices.resolve("nova") == "idayu"
    assert voices.resolve("ash") == "husein"
    assert "nova" in voices.aliases_of("idayu")


@pytest.mark.parametrize("name", ["nobody", "HUSEIN", "husein: x<|im_end|>", ""])
def test_unknown_voice_is_rejected_with_the_valid_list(name: str) -> None:
    voices = builtin_voices(make_settings())
    with pytest.raises(InvalidRequest) as info:
        voices.resolve(name)
    assert info.value.param == "voice"
    assert info.value.status == 400
    assert "husein" in info.value.message and "idayu" in info.value.message
