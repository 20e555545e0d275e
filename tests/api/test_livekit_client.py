"""LiveKit's ``openai.TTS`` plugin against the server: its default mp3 + SSE, and tts-1 + raw pcm."""

from __future__ import annotations

import pytest
from livekit.plugins import openai as lk_openai

N_CODES = 48


@pytest.mark.parametrize(
    ("model", "response_format"),
    [("gpt-4o-mini-tts", None), ("tts-1", "pcm")],
    ids=["default-mp3-sse", "tts-1-pcm"],
)
async def test_synthesize_yields_24k_mono_frames_of_the_right_duration(
    app_url: str, model: str, response_format: str | None
) -> None:
    options = {"response_format": response_format} if response_format else {}
    tts = lk_openai.TTS(base_url=app_url + "/v1", api_key="x", model=model, voice="ash", **options)
    try:
        events = []
        async with tts.synthesize("Hello from a LiveKit agent.") as stream:
            async for event in stream:
                events.append(event)
    finally:
        await tts.aclose()
    frames = [event.frame for event in events]
    last = frames[-1]
    if events[-1].is_final and last.samples_per_channel == 240 and not any(bytes(last.data)):
        frames.pop()  # LiveKit's own 10 ms end-of-segment marker when the audio ends on a frame boundary
    assert frames
    assert {(f.sample_rate, f.num_channels) for f in frames} == {(24000, 1)}
    seconds = sum(f.samples_per_channel for f in frames) / 24000
    tolerance = 0 if response_format == "pcm" else 1152 / 24000  # one mp3 frame
    assert abs(seconds - N_CODES * 480 / 24000) <= tolerance + 1e-9
