"""Settings: parsing, validation, and .env_example kept in step with the fields."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.config import Settings
from app.core.settings import ServerSettings, env_names
from app.core.voices import OPENAI_VOICES
from app.families.registry import specs
from tests.conftest import make_settings

ENV_EXAMPLE = Path(__file__).resolve().parents[1] / ".env_example"


def test_env_example_lists_exactly_the_settings() -> None:
    keys = re.findall(r"^([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(), flags=re.MULTILINE)
    assert len(keys) == len(set(keys)), "a setting is listed twice"
    assert set(keys) == set(Settings.model_fields)


def test_each_family_s_settings_are_its_block_of_env_example() -> None:
    """Shared settings come first; each registered family's own settings are exactly its block."""
    blocks: dict[str, set[str]] = {"": set()}
    current = ""
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.startswith("# === family: "):
            current = line.removeprefix("# === family: ").split()[0]
            blocks[current] = set()
        elif match := re.match(r"^([A-Z][A-Z0-9_]*)=", line):
            blocks[current].add(match.group(1))
    assert blocks.pop("") == set(ServerSettings.model_fields)
    assert set(blocks) == {spec.name for spec in specs()}
    for spec in specs():
        assert blocks[spec.name] == set(spec.settings.model_fields) - set(ServerSettings.model_fields)


@pytest.mark.parametrize(
    ("old", "new", "value", "expected"),
    [
        ("LM_BATCH_SIZE", "LM_MAX_BATCH", "3", 3),
        ("LM_BATCH_CACHE_TOKENS", "LM_CACHE_POSITIONS", "999", 999),
        ("VC_ENABLED", "REFERENCE_VOICES", "false", False),
        ("DEFAULT_SPEAKER", "DEFAULT_VOICE", "idayu", "idayu"),
        ("MOSS_TTS_DEVICE", "MOSS_DEVICE", "cpu", "cpu"),
        ("MOSS_TTS_DTYPE", "MOSS_LM_DTYPE", "bfloat16", "bfloat16"),
        ("MOSS_TTS_ATTENTION", "MOSS_LM_ATTENTION", "eager", "eager"),
        ("MOSS_CACHE_ROWS", "MOSS_CACHE_POSITIONS", "4096", 4096),
        ("MOSS_VOICE_PROMPTS", "MOSS_REFERENCE_VOICES", "false", False),
    ],
)
def test_renamed_settings_still_read_their_old_names(
    monkeypatch: pytest.MonkeyPatch, old: str, new: str, value: str, expected: object
) -> None:
    monkeypatch.setenv(old, value)
    assert getattr(Settings(_env_file=None), new) == expected
    assert old in env_names(Settings) and new in env_names(Settings)


def test_model_families_must_be_registered() -> None:
    with pytest.raises(ValidationError, match="choose from neucodec, moss"):
        make_settings(MODEL_FAMILIES="neucodec,cosyvoice")


def test_env_example_values_are_the_defaults() -> None:
    from_file = Settings(_env_file=ENV_EXAMPLE)
    assert from_file.model_dump() == Settings(_env_file=None, VOICES_DIR="voices").model_dump()


def test_every_setting_is_documented() -> None:
    for name, field in Settings.model_fields.items():
        assert field.description, name
        assert re.search(rf"^{name}=.*#\s*\S", ENV_EXAMPLE.read_text(), flags=re.MULTILINE), name


def test_seed_defaults() -> None:
    s = make_settings()
    assert s.TTS_API == "http://127.0.0.1:9093"
    assert s.MODEL_NAME == "TTS-model"
    assert (s.DEFAULT_TEMPERATURE, s.DEFAULT_REPETITION_PENALTY, s.DEFAULT_MAX_TOKENS) == (0.6, 1.15, 3072)
    # the first window is 0.2 s (10 codes) and grows x6 (docs/benchmarks.md, "First audio and stalls")
    assert (s.DEFAULT_PLAYBACK_SPEED, s.DEFAULT_PLAYBACK_OVERLAP_SPEED) == (0.2, 0.2)
    assert (s.STREAM_CHUNK_GROWTH, s.STREAM_MAX_CHUNK_S) == (6.0, 15.0)
    assert (s.STREAM_PAST_CONTEXT_S, s.CROSSFADE_MS, s.DISCONNECT_POLL_S) == (0.2, 100.0, 0.25)
    assert s.STREAM_REDECODE_BUDGET == 0.2
    plain = Settings(_env_file=None)  # make_settings turns the timing-dependent parts off
    assert (plain.STREAM_DEADLINE_CUTS, plain.MOSS_DEADLINE_CUTS, plain.VIABILITY_CHECK) == (True, True, True)
    # windows fitted to the codec's load with 1.2x to spare; admission while a 0.5 s first window does
    assert (plain.STREAM_FIRST_COVER, plain.VIABILITY_MAX_FIRST_S) == (1.2, 0.5)


def test_speakers_and_aliases_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPEAKERS", " anna , ben ")
    monkeypatch.setenv("DEFAULT_VOICE", "ben")
    s = Settings(_env_file=None)
    assert s.SPEAKERS == ["anna", "ben"]
    # unset aliases: every OpenAI voice maps to a configured voice (the default when its own is absent)
    assert set(s.VOICE_ALIASES) == set(OPENAI_VOICES)
    assert set(s.VOICE_ALIASES.values()) == {"ben"}
    monkeypatch.setenv("VOICE_ALIASES", "alloy=anna, nova=ben")
    assert Settings(_env_file=None).VOICE_ALIASES == {"alloy": "anna", "nova": "ben"}
    monkeypatch.setenv("VOICE_ALIASES", '{"echo": "anna"}')
    assert Settings(_env_file=None).VOICE_ALIASES == {"echo": "anna"}


@pytest.mark.parametrize(
    "overrides",
    [
        {"DEFAULT_VOICE": "nobody"},
        {"SPEAKERS": ""},
        {"VOICE_ALIASES": "alloy=nobody"},
        {"VOICE_ALIASES": "alloy"},
        {"DEFAULT_PLAYBACK_SPEED": 0},
        {"STREAM_CHUNK_GROWTH": 0.5},
        {"LM_BACKEND": "magic"},
        {"DEFAULT_TEMPERATURE": -1},
        {"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"},
        {"OPENAI_MODEL_NAME": "gemma"},
        {"DEFAULT_NORMALIZER_MODE": "magic"},
    ],
)
def test_invalid_settings_fail_at_startup(overrides: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        make_settings(**overrides)
