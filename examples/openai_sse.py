"""OpenAI's SSE stream (``stream_format="sse"``): ``speech.audio.delta`` events carry base64 audio,
``speech.audio.done`` carries the token usage, ``data: [DONE]`` ends it.

    pip install openai
    TTS_API_BASE_URL=http://localhost:9091 python examples/openai_sse.py [sse.pcm]
"""

from __future__ import annotations

import base64
import json
import os
import sys

from openai import OpenAI


def main(out: str = "sse.pcm") -> None:
    base_url = os.environ.get("TTS_API_BASE_URL", "http://localhost:9091")
    client = OpenAI(api_key="not-needed", base_url=f"{base_url}/v1")
    deltas = 0
    usage = None
    with (
        client.audio.speech.with_streaming_response.create(
            model="gpt-4o-mini-tts",
            voice="coral",
            input="Events, one chunk at a time.",
            response_format="pcm",
            stream_format="sse",
            extra_body={"max_tokens": 300},
        ) as response,
        open(out, "wb") as file,
    ):
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line.removeprefix("data: "))
            if event["type"] == "speech.audio.delta":
                file.write(base64.b64decode(event["audio"]))
                deltas += 1
            elif event["type"] == "speech.audio.done":
                usage = event["usage"]
            elif event["type"] == "error":
                raise RuntimeError(f"the stream failed: {event}")
    if usage is None:
        raise RuntimeError("the stream ended without speech.audio.done")
    print(f"wrote {out}: {deltas} audio events, usage {usage}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
