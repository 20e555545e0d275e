"""Redis goes away mid-run: what needs it answers 503 with the OpenAI error body, the rest keeps working.

The app reaches the project's Redis through a TCP relay that the test can shut (refusing connections
and dropping the open ones, as a Redis that died would) and open again.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import httpx

from tests.api.conftest import REFERENCE_TEXT, http_settings, serve
from tests.api.test_speech_http import assert_openai_error
from tests.fakes.fake_vllm import FakeVLLM

SPEECH = "/v1/audio/speech"
VOICES = "/v1/audio/voices"


class Relay:
    """Forwards TCP connections from a local port to 127.0.0.1:6379 while open."""

    def __init__(self) -> None:
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def shut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()
        self._server = None

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", 6379)
        self._writers |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}


async def test_registration_and_interleave_503_while_redis_is_down_built_in_speech_goes_on(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, reference_wav: bytes, redis_prefix: str
) -> None:
    relay = Relay()
    await relay.open()
    settings = http_settings(
        tiny_codec_dir,
        fake_vllm.url,
        VOICE_STORE="redis",
        INTERLEAVE_STORE="redis",
        REDIS_URL=f"redis://127.0.0.1:{relay.port}/0",
        REDIS_KEY_PREFIX=redis_prefix,
    )
    form = {"name": "kept", "reference_text": REFERENCE_TEXT}
    upload = {"audio_sample": ("sample.wav", reference_wav)}
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        assert (await client.post(VOICES, data=form, files=upload)).status_code == 201
        turn = {"input": "Hello there.", "voice": "husein", "interleave_id": "room"}
        assert (await client.post(SPEECH, json=turn)).status_code == 200
        assert len((await client.get("/v1/audio/interleave/room")).json()["turns"]) == 1

        await relay.shut()
        down = await client.post(VOICES, data=form | {"name": "new_one"}, files=upload)
        assert assert_openai_error(down, 503)["code"] == "voice_store_unavailable"
        assert_openai_error(await client.get(VOICES), 503)
        assert_openai_error(await client.delete(VOICES + "/kept"), 503)
        assert_openai_error(await client.post(SPEECH, json={"input": "Hi.", "voice": "kept"}), 503)
        assert_openai_error(await client.get("/v1/audio/interleave/room"), 503)
        assert_openai_error(await client.delete("/v1/audio/interleave/room"), 503)
        for voice in ("husein", "nova"):  # built-in voices and aliases never need the registry
            spoken = await client.post(SPEECH, json={"input": "Still speaking.", "voice": voice})
            assert spoken.status_code == 200 and spoken.content, spoken.text
        cold = await client.post(SPEECH, json=turn)  # an interleave id goes on cold (docs/interleave.md)
        assert cold.status_code == 200 and cold.headers["X-Interleave-Turns"] == "0"

        await relay.open()  # Redis is back: everything is there again, nothing was lost
        names = [v["name"] for v in (await client.get(VOICES)).json()["voices"] if v["type"] == "registered"]
        assert names == ["kept"]
        assert (await client.post(SPEECH, json={"input": "Hi.", "voice": "kept"})).status_code == 200
        assert (await client.post(VOICES, data=form | {"name": "new_one"}, files=upload)).status_code == 201
        assert len((await client.get("/v1/audio/interleave/room")).json()["turns"]) == 1
    await relay.shut()
