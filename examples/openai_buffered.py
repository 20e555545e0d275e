"""The whole file with the OpenAI SDK: ``create`` returns once it has read the whole body.

pip install openai
TTS_API_BASE_URL=http://localhost:9091 python examples/openai_buffered.py [hello.wav]
"""

from __future__ import annotations

import os
import sys

from openai import OpenAI


def main(out: str = "hello.wav") -> None:
    base_url = os.environ.get("TTS_API_BASE_URL", "http://localhost:9091")
    client = OpenAI(api_key="not-needed", base_url=f"{base_url}/v1")
    speech = client.audio.speech.create(
        model="tts-1",
        voice="alloy",  # OpenAI names map to the server's voices; GET /v1/audio/voices lists them
        input="Hello! How can I help you today?",
        response_format="wav",
        extra_body={"max_tokens": 300},  # our extensions go through extra_body
    )
    speech.write_to_file(out)
    print(f"wrote {out} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main(*sys.argv[1:2])
