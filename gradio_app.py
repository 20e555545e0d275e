"""A Gradio UI for poking at a running server (local or remote): speech, normalization, voice
conversion and voice registration, plus a connection check.

    pip install -r requirements-gradio.txt
    TTS_API_BASE_URL=http://localhost:9091 python gradio_app.py [--host 127.0.0.1] [--port 7860]

It is a thin HTTP client of the API (``TTS_API_BASE_URL``, default ``http://localhost:9091``; the URL
can be changed in the page). Streamed speech is requested as raw pcm, so the TTFB it shows is the
time to the first audio byte as this app received it, and is played while it arrives (Gradio encodes
the streamed player with ffmpeg, which must be installed). Generated audio goes to uniquely named
files in a temporary directory of this process, removed when it exits.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
import time
import wave
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import gradio as gr
import httpx

DEFAULT_BASE_URL = "http://localhost:9091"
SAMPLE_RATE = 24000
FORMATS = ["wav", "mp3", "opus", "aac", "flac", "pcm"]
MODES = ["rule", "spoken", "llm"]
LANGUAGES = ["auto", "en", "ms", "zh", "ta"]
STREAM_CHUNK_BYTES = SAMPLE_RATE * 2 // 5  # hand the player at least 0.2 s at a time
TIMEOUT = httpx.Timeout(300.0, connect=10.0)


def wav_bytes(pcm: bytes, sample_rate: int = SAMPLE_RATE) -> bytes:
    """16-bit mono ``pcm`` wrapped in a WAV header."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sample_rate)
        wav.writeframes(pcm)
    return out.getvalue()


def error_message(response: httpx.Response) -> str:
    """The server's error (the OpenAI ``{"error": {"message"}}`` body) with its status."""
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text[:300]
    return f"HTTP {response.status_code}: {message}"


class DemoClient:
    """The UI's calls to the API; every output file is unique to its request, under ``workdir``."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def save(self, data: bytes, suffix: str) -> str:
        """Write ``data`` to a new uniquely named file; return its path."""
        fd, path = tempfile.mkstemp(prefix="tts-", suffix=suffix, dir=self.workdir)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        return path

    def save_audio(self, data: bytes, fmt: str) -> str:
        """Save a whole response for the player (raw pcm gets a WAV header to be playable)."""
        return self.save(wav_bytes(data), ".wav") if fmt == "pcm" else self.save(data, f".{fmt}")

    async def check(self, base_url: str) -> tuple[str, Any]:
        """GET /health, /v1/models and /v1/audio/voices: a status line and the voice dropdown update."""
        url = base_url.rstrip("/")
        try:
            async with httpx.AsyncClient(timeout=10.0) as client:
                health = await client.get(url + "/health")
                models = await client.get(url + "/v1/models")
                voices = await client.get(url + "/v1/audio/voices")
        except httpx.HTTPError as exc:
            return f"Cannot reach {url}: {exc!r}", gr.update()
        for response in (health, models, voices):
            if response.status_code != 200:
                return f"{response.request.url.path}: {error_message(response)}", gr.update()
        model_ids = [model["id"] for model in models.json().get("data", [])]
        names = [voice["id"] for voice in voices.json().get("voices", [])]
        status = (
            f"Connected to {url}: health {health.json().get('status', 'ok')}; "
            f"models {', '.join(model_ids)}; {len(names)} voices."
        )
        return status, gr.update(choices=names, value=names[0] if names else None)

    async def speak(
        self,
        base_url: str,
        text: str,
        voice: str,
        mode: str,
        language: str,
        normalize_malaysian: bool,
        speed: float,
        playback_speed: float,
        temperature: float,
        max_tokens: float,
        fmt: str,
        stream: bool,
    ) -> AsyncIterator[tuple[Any, Any, str]]:
        """Speech: streamed pcm played as it arrives (then the whole WAV), or one whole file in ``fmt``.

        Yields (streamed player chunk, whole-file player, status).
        """
        body = {
            "input": text,
            "voice": voice or None,
            "mode": mode,
            "language": language,
            "normalize_malaysian": normalize_malaysian,
            "speed": speed,
            "playback_speed": playback_speed,
            "temperature": temperature,
            "max_tokens": int(max_tokens),
            "response_format": "pcm" if stream else fmt,
            "stream": stream,
        }
        url = base_url.rstrip("/") + "/v1/audio/speech"
        started = time.perf_counter()
        ttfb: float | None = None
        received = bytearray()
        pending = bytearray()
        try:
            async with (
                httpx.AsyncClient(timeout=TIMEOUT) as client,
                client.stream("POST", url, json=body) as response,
            ):
                if response.status_code != 200:
                    await response.aread()
                    yield None, None, error_message(response)
                    return
                async for chunk in response.aiter_bytes():
                    if ttfb is None and chunk:
                        ttfb = time.perf_counter() - started
                    received += chunk
                    if not stream:
                        continue
                    pending += chunk
                    whole = len(pending) - len(pending) % 2
                    if whole >= STREAM_CHUNK_BYTES:
                        part, pending[:] = bytes(pending[:whole]), pending[whole:]
                        yield wav_bytes(part), gr.update(), f"Streaming... TTFB {ttfb:.3f} s"
        except httpx.HTTPError as exc:
            yield None, None, f"Request failed: {exc!r}"
            return
        total = time.perf_counter() - started
        if stream and len(pending) >= 2:
            yield wav_bytes(bytes(pending[: len(pending) - len(pending) % 2])), gr.update(), "Streaming..."
        status = f"TTFB {ttfb or 0:.3f} s, total {total:.2f} s, {len(received)} bytes"
        if stream:
            audio_s = len(received) / 2 / SAMPLE_RATE
            status += f", {audio_s:.2f} s of audio (RTF {total / audio_s:.2f})" if audio_s else ""
        yield None, self.save_audio(bytes(received), body["response_format"]), status

    async def normalize(
        self, base_url: str, text: str, mode: str, language: str, normalize_malaysian: bool, prompt: str
    ) -> tuple[str, str]:
        """POST /v1/audio/normalize: the output text and a status line."""
        body = {"input": text, "mode": mode, "language": language, "normalize_malaysian": normalize_malaysian}
        if prompt.strip():
            body["prompt"] = prompt
        try:
            async with httpx.AsyncClient(timeout=60.0) as client:
                response = await client.post(base_url.rstrip("/") + "/v1/audio/normalize", json=body)
        except httpx.HTTPError as exc:
            return "", f"Request failed: {exc!r}"
        if response.status_code != 200:
            return "", error_message(response)
        result = response.json()
        return result["output"], f"mode used: {result['mode']}"

    async def convert(
        self,
        base_url: str,
        reference_audio: str | None,
        reference_text: str,
        generate_text: str,
        speed: float,
        temperature: float,
        fmt: str,
    ) -> tuple[str | None, str]:
        """POST /v1/audio/vc (multipart), whole file: the audio path and a status line."""
        if not reference_audio:
            return None, "Upload or record a reference clip first."
        form = {
            "reference_text": reference_text,
            "generate_text": generate_text,
            "speed": str(speed),
            "temperature": str(temperature),
            "response_format": fmt,
            "stream": "false",
        }
        started = time.perf_counter()
        try:
            with open(reference_audio, "rb") as clip:
                files = {"reference_audio": (Path(reference_audio).name, clip.read())}
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                response = await client.post(base_url.rstrip("/") + "/v1/audio/vc", data=form, files=files)
        except (OSError, httpx.HTTPError) as exc:
            return None, f"Request failed: {exc!r}"
        if response.status_code != 200:
            return None, error_message(response)
        status = f"{len(response.content)} bytes in {time.perf_counter() - started:.2f} s"
        return self.save_audio(response.content, fmt), status

    async def register(
        self, base_url: str, audio_sample: str | None, name: str, reference_text: str, consent: str
    ) -> tuple[str, Any]:
        """POST /v1/audio/voices: the voice object (or the error) and the refreshed voice dropdown."""
        if not audio_sample:
            return "Upload or record a clip first.", gr.update()
        form = {"name": name, "reference_text": reference_text}
        if consent.strip():
            form["consent"] = consent
        url = base_url.rstrip("/")
        try:
            with open(audio_sample, "rb") as clip:
                files = {"audio_sample": (Path(audio_sample).name, clip.read())}
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                response = await client.post(url + "/v1/audio/voices", data=form, files=files)
                voices = await client.get(url + "/v1/audio/voices")
        except (OSError, httpx.HTTPError) as exc:
            return f"Request failed: {exc!r}", gr.update()
        if response.status_code not in (200, 201):
            return error_message(response), gr.update()
        names = [voice["id"] for voice in voices.json().get("voices", [])]
        return json.dumps(response.json(), indent=2), gr.update(choices=names, value=name)


def build_ui(base_url: str, workdir: Path) -> gr.Blocks:
    """The page: connection row, then the four tabs."""
    client = DemoClient(workdir)
    with gr.Blocks(title="Streaming TTS demo", analytics_enabled=False, delete_cache=(600, 3600)) as demo:
        gr.Markdown(
            "# Streaming TTS demo\nA client of a running server: set its URL and check the connection."
        )
        with gr.Row():
            url = gr.Textbox(base_url, label="API base URL", scale=4)
            check = gr.Button("Check connection", scale=1)
        connection = gr.Markdown("Not checked yet.", elem_id="connection-status")

        with gr.Tab("Speech"):
            text = gr.Textbox("Hello! How can I help you today?", label="Text", lines=3)
            with gr.Row():
                voice = gr.Dropdown([], label="Voice", allow_custom_value=True)
                mode = gr.Radio(MODES, value="rule", label="Normalizer mode")
                language = gr.Dropdown(LANGUAGES, value="auto", label="Language")
                malaysian = gr.Checkbox(False, label="Malaysian entities (rule and spoken modes)")
            with gr.Row():
                speed = gr.Slider(0.5, 2.0, value=1.0, step=0.05, label="Speaking rate (speed)")
                playback = gr.Slider(0.1, 4.0, value=2.0, step=0.1, label="Playback speed (first window, s)")
                temperature = gr.Slider(0.0, 1.5, value=0.6, step=0.05, label="Temperature")
                max_tokens = gr.Number(1024, label="Max speech tokens (50 per s)", precision=0)
            with gr.Row():
                stream = gr.Checkbox(True, label="Stream playback (raw pcm, TTFB measured)")
                fmt = gr.Dropdown(FORMATS, value="wav", label="Format (whole-file mode)")
                speak = gr.Button("Generate speech", variant="primary")
            streamed = gr.Audio(label="Streamed", streaming=True, autoplay=True, elem_id="streamed-audio")
            whole = gr.Audio(label="Whole response", type="filepath", elem_id="speech-audio")
            speech_status = gr.Markdown(elem_id="speech-status")

        with gr.Tab("Normalization"):
            norm_text = gr.Textbox(
                "Your total is RM1,250.50, due at 3pm on 12/9/2026.", label="Text", lines=3
            )
            with gr.Row():
                norm_mode = gr.Radio(MODES, value="spoken", label="Mode")
                norm_language = gr.Dropdown(LANGUAGES, value="auto", label="Language")
                norm_malaysian = gr.Checkbox(True, label="Malaysian entities (rule and spoken modes)")
            norm_prompt = gr.Textbox("", label="Extra instructions (llm mode)")
            normalize = gr.Button("Normalize", variant="primary")
            norm_output = gr.Textbox(label="Normalized", lines=3, elem_id="normalized-output")
            norm_status = gr.Markdown()

        with gr.Tab("Voice conversion"):
            vc_audio = gr.Audio(
                label="Reference clip (1-30 s)", type="filepath", sources=["upload", "microphone"]
            )
            vc_ref_text = gr.Textbox(label="Transcript of the reference clip")
            vc_text = gr.Textbox("Ye encik, apa yang saya boleh tolong?", label="Text to speak")
            with gr.Row():
                vc_speed = gr.Slider(0.5, 2.0, value=1.0, step=0.05, label="Speaking rate")
                vc_temperature = gr.Slider(0.0, 1.5, value=0.6, step=0.05, label="Temperature")
                vc_fmt = gr.Dropdown(FORMATS, value="wav", label="Format")
            convert = gr.Button("Convert", variant="primary")
            vc_out = gr.Audio(label="Converted", type="filepath")
            vc_status = gr.Markdown()

        with gr.Tab("Register a voice"):
            reg_audio = gr.Audio(
                label="Clip of the voice (1-30 s)", type="filepath", sources=["upload", "microphone"]
            )
            with gr.Row():
                reg_name = gr.Textbox(label="Name (A-Z a-z 0-9 _ -)")
                reg_consent = gr.Textbox(label="Consent record (optional)")
            reg_text = gr.Textbox(label="Transcript of the clip")
            register = gr.Button("Register", variant="primary")
            reg_result = gr.Code(label="Result", language="json")

        check.click(client.check, [url], [connection, voice])
        demo.load(client.check, [url], [connection, voice])
        speak.click(
            client.speak,
            [
                url,
                text,
                voice,
                mode,
                language,
                malaysian,
                speed,
                playback,
                temperature,
                max_tokens,
                fmt,
                stream,
            ],
            [streamed, whole, speech_status],
        )
        normalize.click(
            client.normalize,
            [url, norm_text, norm_mode, norm_language, norm_malaysian, norm_prompt],
            [norm_output, norm_status],
        )
        convert.click(
            client.convert,
            [url, vc_audio, vc_ref_text, vc_text, vc_speed, vc_temperature, vc_fmt],
            [vc_out, vc_status],
        )
        register.click(
            client.register, [url, reg_audio, reg_name, reg_text, reg_consent], [reg_result, voice]
        )
    return demo


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to serve the UI on (0.0.0.0: all)")
    parser.add_argument("--port", type=int, default=7860)
    args = parser.parse_args(argv)
    base_url = os.environ.get("TTS_API_BASE_URL", DEFAULT_BASE_URL)
    with tempfile.TemporaryDirectory(prefix="tts-gradio-") as workdir:
        demo = build_ui(base_url, Path(workdir))
        demo.queue().launch(server_name=args.host, server_port=args.port, ssr_mode=False, show_error=True)


if __name__ == "__main__":
    main()
