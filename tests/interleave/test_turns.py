"""Turn records: JSON round trip and validation, the retention rule, text tails, ids and headers."""

from __future__ import annotations

import json

import pytest

from app.core.errors import ValidationFailed
from app.interleave.ids import digest, header_echo, header_id, interleave_id
from app.interleave.turns import Turn, cut_to_tail, retain, text_tail, trailing_run


def t(text: str, n: int = 1, voice: str = "husein") -> Turn:
    return Turn(voice, text, tuple(range(n)))


def test_json_round_trip_keeps_any_text() -> None:
    turn = Turn("husein", 'quote " slash \\ 你好 \x00 \U0001f600', (0, 65535, 7))
    text = turn.to_json()
    assert text.isascii()
    assert Turn.from_obj(json.loads(text)) == turn


@pytest.mark.parametrize(
    "obj",
    [
        [],
        {"voice": "a", "text": "b"},
        {"voice": "a", "text": "b", "codes": []},
        {"voice": "a", "text": "b", "codes": [65536]},
        {"voice": "a", "text": "b", "codes": [-1]},
        {"voice": "a", "text": "b", "codes": [1.0]},
        {"voice": "a", "text": "b", "codes": [True]},
        {"voice": 1, "text": "b", "codes": [1]},
        {"voice": "a", "text": None, "codes": [1]},
    ],
)
def test_invalid_turns_are_rejected(obj: object) -> None:
    with pytest.raises(ValueError):
        Turn.from_obj(obj)


def test_trailing_run() -> None:
    turns = [t("a"), t("b", voice="idayu"), t("c"), t("d")]
    assert trailing_run(turns, "husein") == turns[2:]
    assert trailing_run(turns, "idayu") == []
    assert trailing_run([], "husein") == []


def test_retain_keeps_the_newest_run_within_the_caps() -> None:
    turns = [t("old", 5, voice="idayu"), t("a", 5), t("b", 5), t("c", 5)]
    assert retain(turns, keep=0, max_codes=1000) == turns[1:]  # the voice switch ends the run
    assert retain(turns, keep=2, max_codes=1000) == turns[2:]
    # codes: c (5) < 7, b (10) crosses 7 and is kept whole, a is not needed
    assert retain(turns, keep=0, max_codes=7) == turns[2:]
    assert retain(turns, keep=0, max_codes=5) == turns[3:]
    assert retain([], keep=0, max_codes=5) == []


@pytest.mark.parametrize(
    ("text", "fraction", "tail"),
    [
        ("one two three four", 2 / 3, "three four"),  # a cut inside "two" moves to the next word
        ("one two three four", 1.0, "one two three four"),
        ("one two three four", 0.01, "r"),  # nothing after the cut word: the cut stays
        ("abcdefgh", 0.5, "efgh"),
        ("你好世界再见", 0.5, "界再见"),
        ("我爱 Kuala Lumpur 的美食", 0.5, "Lumpur 的美食"),
        ("我爱 Kuala Lumpur 的美食", 0.4, "的美食"),  # inside "Lumpur": to the next word
    ],
)
def test_text_tail(text: str, fraction: float, tail: str) -> None:
    assert text_tail(text, fraction) == tail


def test_cut_to_tail_keeps_the_last_codes() -> None:
    turn = Turn("husein", "alpha beta gamma delta", (1, 2, 3, 4))
    cut = cut_to_tail(turn, 2)
    assert cut.codes == (3, 4) and cut.text == "gamma delta" and cut.voice == "husein"
    assert cut_to_tail(turn, 4) is turn
    assert cut_to_tail(turn, 9) is turn


def test_request_id_prefers_the_body() -> None:
    assert interleave_id("body-id", "header-id") == "body-id"
    assert interleave_id(None, "header-id") == "header-id"
    assert interleave_id("", "header-id") == "header-id"
    assert interleave_id(None, None) is None
    assert interleave_id(None, "   ") is None


def test_header_ids_are_read_as_utf8_and_limited() -> None:
    utf8_as_latin1 = "salle-été-房间".encode().decode("latin-1")  # how the server sees UTF-8 header bytes
    assert header_id(utf8_as_latin1) == "salle-été-房间"
    assert header_id("caf\xe9") == "caf\xe9"  # not UTF-8: kept as latin-1 text
    assert header_id("x" * 256) == "x" * 256
    with pytest.raises(ValidationFailed) as raised:
        header_id("x" * 257)
    assert raised.value.param == "X-Interleave-Id"


def test_digest_and_header_echo() -> None:
    keys = {digest(i) for i in ["a", "a ", "../a", "a\x00", "\ud800", "房间"]}
    assert len(keys) == 6 and all(len(k) == 64 and set(k) <= set("0123456789abcdef") for k in keys)
    assert header_echo("room-42") == "room-42"
    assert header_echo("房间 42") == "%E6%88%BF%E9%97%B4%2042"
    assert header_echo("a\r\nb") == "a%0D%0Ab"
    assert header_echo("\ud800") == "%ED%A0%80"
