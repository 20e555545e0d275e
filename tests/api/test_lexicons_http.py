"""Pronunciation lexicons end to end, in the file store and in Redis: create (JSON, PLS), list, get,
delete with ownership, limits, and precedence request > voice > server-wide, applied before the
normalizer (numbers in a replacement are still read)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import http_settings, serve
from tests.api.test_speech_http import assert_openai_error
from tests.api.test_voices_http import bearer, register
from tests.api.test_voices_http import store_settings as store_settings  # the fixture: both stores
from tests.fakes.fake_vllm import FakeVLLM
from tests.interleave.conftest import redis_prefix  # noqa: F401  (a test's own Redis keys)

LEXICONS = "/v1/audio/lexicons"
NORMALIZE = "/v1/audio/normalize"
PLS = """<?xml version="1.0" encoding="UTF-8"?>
<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon"
         alphabet="ipa" xml:lang="ms-MY">
  <lexeme><grapheme>Jln.</grapheme><grapheme>Jl.</grapheme><alias>Jalan</alias></lexeme>
  <lexeme><grapheme>TTDI</grapheme><alias>Taman Tun Dr Ismail</alias></lexeme>
</lexicon>"""


def entries(*pairs: tuple[str, str]) -> list[dict[str, object]]:
    return [{"grapheme": grapheme, "alias": alias} for grapheme, alias in pairs]


def spoken(prompt: str) -> str:
    """The text of a prompt's last turn (a built-in voice's "voice: text", or a reference voice's)."""
    last = prompt.rsplit("<|im_start|>", 1)[1].removesuffix("<|speech_start|>")
    return last.split(": ", 1)[1] if last.startswith("husein: ") else last


async def test_create_list_get_use_and_delete_in_both_stores(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, store_settings: dict[str, object]
) -> None:
    settings = http_settings(tiny_codec_dir, fake_vllm.url, **store_settings)
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        made = await client.post(LEXICONS, json={"name": "streets", "pls": PLS})
        assert made.status_code == 201, made.text
        assert made.json() == {
            "id": "streets", "object": "lexicon", "name": "streets", "entries": 3,
            "created_at": made.json()["created_at"],
        }  # fmt: skip
        codes = {
            "name": "codes",
            "entries": entries(("KWSP", "K W S P"), ("BlokA", "Blok 2")),
            "case_sensitive": True,
        }
        assert (await client.post(LEXICONS, json=codes)).status_code == 201
        listed = (await client.get(LEXICONS)).json()["lexicons"]
        assert [(item["name"], item["entries"]) for item in listed] == [("codes", 2), ("streets", 3)]
        got = (await client.get(LEXICONS + "/streets")).json()
        assert got["entries"][0] == {
            "grapheme": "Jln.",
            "alias": "Jalan",
            "case_sensitive": False,
            "language": "ms",
        }
        # before normalization: "2" in the replacement is still read; the ms scope holds in Malay text only
        body = {
            "input": "Rumah di Jln. Ampang, TTDI, BlokA, KWSP dan kwsp.",
            "mode": "spoken",
            "language": "ms",
        }
        result = (await client.post(NORMALIZE, json=body | {"lexicons": ["streets", "codes"]})).json()
        assert (
            result["output"] == "Rumah di Jalan Ampang, Taman Tun Doktor Ismail, Blok dua, K W S P dan kwsp."
        )
        english = {"input": "I live in TTDI.", "mode": "spoken", "language": "en", "lexicons": ["streets"]}
        assert (await client.post(NORMALIZE, json=english)).json()["output"] == "I live in TTDI."
        speech = await client.post(
            "/v1/audio/speech", json={"input": "Sila ke Jl. Ampang", "lexicons": ["streets"]}
        )
        assert speech.status_code == 200
        assert spoken(fake_vllm.requests[-1].body["prompt"]) == "Sila ke Jalan Ampang"  # detected: Malay
        unknown = await client.post(NORMALIZE, json={"input": "hi", "lexicons": ["nope"]})
        assert assert_openai_error(unknown, 400, "lexicons")["code"] == "lexicon_not_found"
        assert (
            assert_openai_error(await client.post(LEXICONS, json=codes), 409, "name")["code"]
            == "lexicon_exists"
        )
        assert (await client.delete(LEXICONS + "/codes")).json() == {
            "id": "codes",
            "object": "lexicon",
            "deleted": True,
        }
        assert_openai_error(await client.delete(LEXICONS + "/codes"), 404, "name")
        assert_openai_error(await client.get(LEXICONS + "/codes"), 404, "name")
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:  # a restart
        assert [item["name"] for item in (await client.get(LEXICONS)).json()["lexicons"]] == ["streets"]


async def test_only_the_key_that_made_a_lexicon_or_an_admin_key_deletes_it(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, store_settings: dict[str, object]
) -> None:
    keys = {"API_KEYS": "key-a,key-b", "ADMIN_API_KEYS": "key-admin"}
    settings = http_settings(tiny_codec_dir, fake_vllm.url, **store_settings, **keys)
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        for name in ("mine", "other"):
            made = await client.post(
                LEXICONS, json={"name": name, "entries": entries(("x", "y"))}, headers=bearer("key-a")
            )
            assert made.status_code == 201
        use = {"input": "x", "lexicons": ["mine"]}
        assert (await client.post(NORMALIZE, json=use, headers=bearer("key-b"))).json()["output"] == "y"
        refused = await client.delete(LEXICONS + "/mine", headers=bearer("key-b"))
        assert assert_openai_error(refused, 403, "name")["code"] == "lexicon_not_owned"
        assert (await client.delete(LEXICONS + "/mine", headers=bearer("key-a"))).status_code == 200
        assert (await client.delete(LEXICONS + "/other", headers=bearer("key-admin"))).status_code == 200
        assert (await client.get(LEXICONS, headers=bearer("key-a"))).json() == {"lexicons": []}


async def test_precedence_is_request_then_voice_then_server(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, reference_wav: bytes, tmp_path: Path
) -> None:
    server = tmp_path / "server.json"
    server.write_text(
        json.dumps({"entries": entries(("KL", "server KL"), ("PJ", "server PJ"), ("JB", "server JB"))})
    )
    settings = http_settings(
        tiny_codec_dir, fake_vllm.url, LEXICON_PATH=str(server), VOICES_DIR=str(tmp_path / "v")
    )
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        voice_lexicon = {"name": "voice", "entries": entries(("KL", "voice KL"), ("PJ", "voice PJ"))}
        assert (await client.post(LEXICONS, json=voice_lexicon)).status_code == 201
        asked = {"name": "asked", "entries": entries(("KL", "asked KL"))}
        assert (await client.post(LEXICONS, json=asked)).status_code == 201
        made = await register(client, "anna", reference_wav, lexicons="voice")
        assert made.status_code == 201 and made.json()["lexicons"] == ["voice"]
        bad = await register(client, "bob", reference_wav, lexicons="voice,missing")
        assert assert_openai_error(bad, 400, "lexicons")["code"] == "lexicon_not_found"
        text = "KL PJ JB"
        for body, expected in (
            ({"voice": "anna", "lexicons": ["asked"]}, "asked KL voice PJ server JB"),
            ({"voice": "anna"}, "voice KL voice PJ server JB"),
            ({"voice": "husein"}, "server KL server PJ server JB"),
        ):
            response = await client.post("/v1/audio/speech", json={"input": text, **body})
            assert response.status_code == 200, response.text
            assert spoken(fake_vllm.requests[-1].body["prompt"]) == expected
        assert (await client.delete(LEXICONS + "/voice")).status_code == 200  # the voice keeps working
        response = await client.post("/v1/audio/speech", json={"input": text, "voice": "anna"})
        assert response.status_code == 200
        assert spoken(fake_vllm.requests[-1].body["prompt"]) == "server KL server PJ server JB"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "a"}, "exactly one of entries and pls"),
        ({"name": "a", "entries": []}, "at least one entry"),
        ({"name": "a", "entries": entries(("x", "y")) * 3}, "at most 2 entries"),
        (
            {
                "name": "a",
                "pls": "<lexicon><lexeme><grapheme>x</grapheme><phoneme>ks</phoneme></lexeme></lexicon>",
            },
            "no <alias>",
        ),
        ({"name": "a", "pls": "<lexicon><lexeme>"}, "line 1, column 18"),
        ({"name": "a", "pls": '<!DOCTYPE l [<!ENTITY e "x">]><lexicon/>'}, "DTD"),
        ({"name": "a", "entries": entries(("x", "y")), "language": "fr"}, "language must be one of"),
        ({"name": "bad name", "entries": entries(("x", "y"))}, "letters, digits"),
    ],
)
async def test_bad_lexicons_are_400_with_a_clear_message(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, body: dict[str, object], message: str
) -> None:
    settings = http_settings(tiny_codec_dir, fake_vllm.url, MAX_LEXICON_ENTRIES=2)
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        error = assert_openai_error(await client.post(LEXICONS, json=body), 400)
    assert message in error["message"], error


async def test_the_lexicon_limit(tiny_codec_dir: Path, fake_vllm: FakeVLLM) -> None:
    settings = http_settings(tiny_codec_dir, fake_vllm.url, MAX_LEXICONS=1)
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        assert (
            await client.post(LEXICONS, json={"name": "a", "entries": entries(("x", "y"))})
        ).status_code == 201
        full = await client.post(LEXICONS, json={"name": "b", "entries": entries(("x", "y"))})
        assert assert_openai_error(full, 400, "name")["code"] == "lexicon_limit_reached"
