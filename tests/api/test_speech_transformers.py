"""/v1/audio/speech with the embedded transformers backend: tiny random Qwen3 LM + tiny NeuCodec."""

from __future__ import annotations

import asyncio
import io
import wave
from pathlib import Path

import httpx
import torch

from tests.api.conftest import serve
from tests.conftest import make_settings

SPEECH = "/v1/audio/speech"


async def test_embedded_backend_streams_buffers_and_survives_disconnects(
    tiny_lm_dir: Path, tiny_codec_dir: Path
) -> None:
    settings = make_settings(
        LM_BACKEND="transformers",
        TTS_MODEL=str(tiny_lm_dir),
        CODEC_MODEL=str(tiny_codec_dir),
        DEVICE="cpu",
        DEFAULT_PLAYBACK_SPEED=0.2,
        DISCONNECT_POLL_S=0.05,
        CODEC_THREADS=1,
    )
    request = {"input": "Hello.", "voice": "idayu", "max_tokens": 30, "seed": 3}  # one generation
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        ready = (await client.get("/ready")).json()
        assert ready["checks"] == {"codec": True, "lm": True}
        # CODEC_THREADS: each torch op on one thread, in the threads started since (the LM's, the codec's)
        assert ready["codec"]["threads"] == 1
        assert await asyncio.to_thread(torch.get_num_threads) == 1

        streamed = await client.post(SPEECH, json=request | {"response_format": "pcm"})
        assert streamed.status_code == 200, streamed.text
        n_codes = len(streamed.content) // (480 * 2)
        assert len(streamed.content) == n_codes * 960 and 1 <= n_codes <= 30

        # the same seed gives the same codes, so the buffered wav holds the same samples
        buffered = await client.post(SPEECH, json=request | {"response_format": "wav", "stream": False})
        assert buffered.status_code == 200
        with wave.open(io.BytesIO(buffered.content)) as wav:
            assert wav.getframerate() == 24000
            assert wav.readframes(10**9) == streamed.content

        # hang up mid-stream on a long generation; the next request must still be served promptly
        async with client.stream("POST", SPEECH, json=request | {"max_tokens": 3000, "seed": 4}) as response:
            assert response.status_code == 200
            async for _chunk in response.aiter_raw():
                break
        after = await asyncio.wait_for(client.post(SPEECH, json=request), timeout=10)
        assert after.status_code == 200
        assert after.content == streamed.content
