"""Raw 24 kHz s16le mono pcm, written to a file as it is generated, with the time to first audio.

pip install openai
TTS_API_BASE_URL=http://localhost:9091 python examples/openai_streaming.py [stream.pcm]
ffplay -f s16le -ar 24000 -ch_layout mono stream.pcm
"""

from __future__ import annotations

import os
import sys
import time

from openai import OpenAI


def main(out: str = "stream.pcm") -> None:
    base_url = os.environ.get("TTS_API_BASE_URL", "http://localhost:9091")
    client = OpenAI(api_key="not-needed", base_url=f"{base_url}/v1")
    started = time.perf_counter()
    first_audio = None
    received = 0
    with (
        client.audio.speech.with_streaming_response.create(
            model="tts-1",
            voice="nova",
            input="Streaming while it speaks. Selamat pagi, apa khabar?",
            response_format="pcm",
            extra_body={"max_tokens": 300, "playback_speed": 0.5},  # a 0.5 s first window: earlier audio
        ) as response,
        open(out, "wb") as file,
    ):
        for chunk in response.iter_bytes():
            if first_audio is None and chunk:
                first_audio = time.perf_counter() - started
            file.write(chunk)
            received += len(chunk)
    seconds = received / 2 / int(response.headers.get("X-Audio-Sample-Rate", 24000))
    print(f"wrote {out}: {seconds:.2f} s of audio, first audio after {first_audio or 0:.3f} s")


if __name__ == "__main__":
    main(*sys.argv[1:2])
