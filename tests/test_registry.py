"""VoiceRegistry: name rules, atomic files, limits, and what a restart reads back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.errors import Conflict, InvalidRequest, NotFound
from app.synthesis.registry import VoiceRegistry

RESERVED = ("husein", "idayu", "alloy", "nova")


def registry(directory: Path, max_voices: int = 3) -> VoiceRegistry:
    return VoiceRegistry(directory, max_voices, RESERVED)


async def test_add_writes_one_json_file_and_a_restart_reads_it(tmp_path: Path) -> None:
    first = registry(tmp_path / "voices")
    voice = await first.add("anna_1", "hello there", [1, 2, 65535], consent="recorded 2026-01-01")
    path = tmp_path / "voices" / "anna_1.json"
    stored = json.loads(path.read_text())
    assert stored["codes"] == [1, 2, 65535] and stored["reference_text"] == "hello there"
    assert [p.name for p in path.parent.iterdir()] == ["anna_1.json"], "no temp files left behind"
    second = registry(tmp_path / "voices")
    await second.load()
    assert second.voices == [voice]


@pytest.mark.parametrize("name", ["", "a b", "../x", "x.json", "é", "a" * 65, "a/b"])
def test_bad_names_are_400(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        registry(tmp_path).check_name(name)
    assert info.value.param == "name" and info.value.code == "invalid_voice_name"


async def test_built_in_voices_aliases_and_taken_names_are_409(tmp_path: Path) -> None:
    voices = registry(tmp_path)
    await voices.add("Anna", "hi", [1], None)
    for name in ("husein", "Nova", "anna", "Anna"):
        with pytest.raises(Conflict):
            voices.check_name(name)


async def test_the_maximum_count_is_enforced(tmp_path: Path) -> None:
    voices = registry(tmp_path, max_voices=2)
    await voices.add("a", "hi", [1], None)
    await voices.add("b", "hi", [1], None)
    with pytest.raises(InvalidRequest) as info:
        await voices.add("c", "hi", [1], None)
    assert info.value.code == "voice_limit_reached"
    await voices.remove("a")
    await voices.add("c", "hi", [1], None)


async def test_remove_deletes_the_file_and_unknown_is_404(tmp_path: Path) -> None:
    voices = registry(tmp_path)
    await voices.add("a", "hi", [1], None)
    await voices.remove("a")
    assert "a" not in voices and not (tmp_path / "a.json").exists()
    with pytest.raises(NotFound):
        await voices.remove("a")


async def test_load_skips_bad_files_and_shadowed_names(tmp_path: Path) -> None:
    good = registry(tmp_path)
    await good.add("ok", "hi", [5], None)
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "range.json").write_text(
        json.dumps({"version": 1, "name": "range", "reference_text": "x", "codes": [70000], "created_at": 1})
    )
    (tmp_path / "renamed.json").write_text((tmp_path / "ok.json").read_text())  # holds voice "ok"
    (tmp_path / "husein.json").write_text((tmp_path / "ok.json").read_text().replace('"ok"', '"husein"'))
    fresh = registry(tmp_path)
    await fresh.load()
    assert [voice.name for voice in fresh.voices] == ["ok"]


async def test_missing_directory_loads_empty_and_is_created_on_first_add(tmp_path: Path) -> None:
    voices = registry(tmp_path / "not" / "yet")
    await voices.load()
    assert voices.voices == []
    await voices.add("x", "hi", [1], None)
    assert (tmp_path / "not" / "yet" / "x.json").is_file()
