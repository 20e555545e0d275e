"""VoiceRegistry over the file store: name rules, atomic files, limits, and what a restart reads back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.errors import Conflict, InvalidRequest, NotFound
from app.synthesis.registry import VoiceRegistry
from app.synthesis.voice_stores.file import FileVoiceStore

RESERVED = ("husein", "idayu", "alloy", "nova")


async def registry(directory: Path, max_voices: int = 3) -> VoiceRegistry:
    made = VoiceRegistry.of(FileVoiceStore(directory), max_voices, RESERVED)
    await made.start()
    return made


async def add(voices: VoiceRegistry, name: str, codes: list[int], consent: str | None = None) -> object:
    return await voices.add(name, "hello there", {"neucodec": codes}, consent, now=1)


async def test_add_writes_one_json_file_and_a_restart_reads_it(tmp_path: Path) -> None:
    first = await registry(tmp_path / "voices")
    voice = await add(first, "anna_1", [1, 2, 65535], consent="recorded 2026-01-01")
    path = tmp_path / "voices" / "anna_1.json"
    stored = json.loads(path.read_text())
    assert stored["version"] == 2 and stored["codes"] == {"neucodec": [1, 2, 65535]}
    assert stored["reference_text"] == "hello there" and stored["consent"] == "recorded 2026-01-01"
    names = sorted(p.name for p in path.parent.iterdir())
    assert names == [".lock", ".version", "anna_1.json"], "no temp files left behind"
    second = await registry(tmp_path / "voices")
    assert await second.voices() == [voice]


async def test_format_1_files_read_as_neucodec_codes(tmp_path: Path) -> None:
    tmp_path.joinpath("old.json").write_text(
        json.dumps({"version": 1, "name": "old", "reference_text": "hi", "codes": [7, 8], "created_at": 3})
    )
    voice = await (await registry(tmp_path)).get("old")
    assert voice is not None and voice.codes == {"neucodec": (7, 8)} and voice.n_codes == 2


@pytest.mark.parametrize("name", ["", "a b", "../x", "x.json", "é", "a" * 65, "a/b"])
async def test_bad_names_are_400(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        await (await registry(tmp_path)).check_name(name)
    assert info.value.param == "name" and info.value.code == "invalid_voice_name"


async def test_built_in_voices_aliases_and_taken_names_are_409(tmp_path: Path) -> None:
    voices = await registry(tmp_path)
    await add(voices, "Anna", [1])
    for name in ("husein", "Nova", "anna", "Anna"):
        with pytest.raises(Conflict):
            await voices.check_name(name)
        with pytest.raises(Conflict):
            await add(voices, name, [1])


async def test_the_maximum_count_is_enforced(tmp_path: Path) -> None:
    voices = await registry(tmp_path, max_voices=2)
    await add(voices, "a", [1])
    await add(voices, "b", [1])
    with pytest.raises(InvalidRequest) as info:
        await add(voices, "c", [1])
    assert info.value.code == "voice_limit_reached"
    await voices.remove("a")
    await add(voices, "c", [1])


async def test_remove_deletes_the_file_and_unknown_is_404(tmp_path: Path) -> None:
    voices = await registry(tmp_path)
    await add(voices, "a", [1])
    await voices.remove("a")
    assert await voices.get("a") is None and not (tmp_path / "a.json").exists()
    for name in ("a", "../a", "A"):
        with pytest.raises(NotFound):
            await voices.remove(name)


async def test_load_skips_bad_files_and_shadowed_names(tmp_path: Path) -> None:
    good = await registry(tmp_path)
    await add(good, "ok", [5])
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "range.json").write_text(
        json.dumps({"version": 1, "name": "range", "reference_text": "x", "codes": [70000], "created_at": 1})
    )
    (tmp_path / "renamed.json").write_text((tmp_path / "ok.json").read_text())  # holds voice "ok"
    (tmp_path / "husein.json").write_text((tmp_path / "ok.json").read_text().replace('"ok"', '"husein"'))
    for index, bad_owner in enumerate(([1], "KEY-IN-CLEAR", 7)):  # an owner is a hex fingerprint
        record = json.loads((tmp_path / "ok.json").read_text()) | {
            "name": f"owned{index}",
            "owner": bad_owner,
        }
        (tmp_path / f"owned{index}.json").write_text(json.dumps(record))
    fresh = await registry(tmp_path)
    assert [voice.name for voice in await fresh.voices()] == ["ok"]


async def test_missing_directory_loads_empty_and_is_created_on_first_add(tmp_path: Path) -> None:
    voices = await registry(tmp_path / "not" / "yet")
    assert await voices.voices() == []
    await add(voices, "x", [1])
    assert (tmp_path / "not" / "yet" / "x.json").is_file()
