"""A Gradio UI for poking at a running server (local or remote): speech, normalization, voice
conversion and voice registration, with a model picker, plus a connection check.

    pip install -r requirements-gradio.txt
    TTS_API_BASE_URL=http://localhost:9091 python gradio_app.py [--host 127.0.0.1] [--port 7860]

It is a thin HTTP client of the API (``TTS_API_BASE_URL``, default ``http://localhost:9091``; the URL
can be changed in the page). The model picker lists the server's ``/v1/models``; the chosen model
decides the voices offered (``/v1/audio/voices`` names the families that accept each voice), the
sampling and max-tokens fields' defaults, and whether the voice conversion and registration tabs are
shown. Streamed speech is requested as raw pcm, so the TTFB it shows is the time to the first audio
byte as this app received it, and is played while it arrives (Gradio encodes the streamed player with
ffmpeg, which must be installed). Generated audio goes to uniquely named files in a temporary
directory of this process, removed when it exits.
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
from dataclasses import dataclass, field
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
NO_REFERENCE = "The chosen model takes no reference audio on this server: choose another to use this tab."
SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "repetition_penalty")
"""Sampling fields filled with the chosen model's defaults (blank where it has none: the server's)."""


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


def given(**fields: Any) -> dict[str, Any]:
    """``fields`` without the blank ones (None or an empty string): the server applies its defaults."""
    return {name: value for name, value in fields.items() if value is not None and value != ""}


@dataclass
class Catalog:
    """What the server offers: ``/v1/models`` entries by id and the ``/v1/audio/voices`` list."""

    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    voices: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, models: dict[str, Any], voices: dict[str, Any]) -> Catalog:
        """From the two endpoints' JSON bodies."""
        return cls({m["id"]: m for m in models.get("data", [])}, list(voices.get("voices", [])))

    def choices(self) -> list[tuple[str, str]]:
        """(label, model id) for the picker: each id with its family when the server names it."""
        return [(f"{mid} ({m['family']})" if m.get("family") else mid, mid) for mid, m in self.models.items()]

    def voices_for(self, model: str | None) -> list[str]:
        """The voices ``model`` accepts: those naming its family (every voice when the server names no
        families)."""
        family = self.models.get(model or "", {}).get("family")
        return [v["id"] for v in self.voices if family is None or family in v.get("families", [family])]

    def takes_reference(self, model: str | None) -> bool:
        """Whether ``model`` takes reference audio (voice conversion, registration) on this server;
        assumed when the server does not say."""
        card = self.models.get(model or "", {})
        return bool(card.get("capabilities", {}).get("reference_voice", True))

    def describe(self, model: str | None) -> str:
        """One Markdown line on ``model``: family, default voice, reference audio, sampling defaults."""
        card = self.models.get(model or "")
        if card is None:
            return "No model chosen."
        capabilities = card.get("capabilities", {})
        defaults = card.get("defaults", {})
        parts = [f"**{card['id']}**"]
        if card.get("family"):
            parts.append(f"family `{card['family']}`")
        if card.get("default_voice"):
            parts.append(f"default voice `{card['default_voice']}`")
        if "reference_voice" in capabilities:
            offered = "offered" if capabilities["reference_voice"] else "not offered on this server"
            parts.append(f"voice conversion and registration {offered}")
        if defaults:
            parts.append("defaults: " + ", ".join(f"{k} {v}" for k, v in defaults.items()))
        return "; ".join(parts) + "."


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

    async def check(self, base_url: str, model: str | None) -> tuple[str, Any, Catalog]:
        """GET /health, /v1/models and /v1/audio/voices: a status line, the model picker's update (the
        chosen model kept when the server still has it; emptied when the server cannot answer) and the
        catalog."""
        url = base_url.rstrip("/")
        try:
            async with httpx.AsyncClient(timeout=10.0) as client:
                health = await client.get(url + "/health")
                models = await client.get(url + "/v1/models")
                voices = await client.get(url + "/v1/audio/voices")
        except httpx.HTTPError as exc:
            return f"Cannot reach {url}: {exc!r}", gr.update(choices=[], value=None), Catalog()
        for response in (health, models, voices):
            if response.status_code != 200:
                status = f"{response.request.url.path}: {error_message(response)}"
                return status, gr.update(choices=[], value=None), Catalog()
        catalog = Catalog.of(models.json(), voices.json())
        ids = list(catalog.models)
        status = (
            f"Connected to {url}: health {health.json().get('status', 'ok')}; "
            f"models {', '.join(ids)}; {len(catalog.voices)} voices."
        )
        chosen = model if model in catalog.models else (ids[0] if ids else None)
        return status, gr.update(choices=catalog.choices(), value=chosen), catalog

    @staticmethod
    def follow_model(model: str | None, catalog: Catalog) -> tuple[Any, ...]:
        """The updates a model choice makes: its description, its voices (its default voice chosen),
        the sampling fields and both max-tokens fields at its defaults, the transcript's label, and the
        voice conversion and registration buttons enabled only when it takes reference audio (a note
        saying so otherwise)."""
        card = catalog.models.get(model or "", {})
        voices = catalog.voices_for(model)
        default_voice = card.get("default_voice")
        voice = default_voice if default_voice in voices else (voices[0] if voices else None)
        defaults = card.get("defaults")

        def default(name: str) -> Any:  # a fresh update per field: Gradio consumes each one
            return gr.update() if defaults is None else gr.update(value=defaults.get(name))

        needs_transcript = card.get("capabilities", {}).get("reference_transcript", True)
        transcript = "Transcript of the reference clip" + ("" if needs_transcript else " (optional)")
        reference = catalog.takes_reference(model)
        return (
            catalog.describe(model),
            gr.update(choices=voices, value=voice),
            *(default(name) for name in SAMPLING_FIELDS),
            default("max_tokens"),  # the Speech tab's
            default("max_tokens"),  # the Voice conversion tab's
            gr.update(label=transcript),
            gr.update(interactive=reference),  # Convert
            gr.update(visible=not reference),
            gr.update(interactive=reference),  # Register
            gr.update(visible=not reference),
        )

    async def speak(
        self,
        base_url: str,
        model: str | None,
        text: str,
        voice: str,
        mode: str,
        language: str,
        normalize_malaysian: bool,
        speed: float,
        playback_speed: float,
        temperature: float | None,
        top_p: float | None,
        top_k: float | None,
        repetition_penalty: float | None,
        seed: float | None,
        max_tokens: float | None,
        fmt: str,
        stream: bool,
    ) -> AsyncIterator[tuple[Any, Any, str]]:
        """Speech: streamed pcm played as it arrives (then the whole WAV), or one whole file in ``fmt``.

        Yields (streamed player chunk, whole-file player, status).
        """
        body = given(
            model=model,
            input=text,
            voice=voice,
            mode=mode,
            language=language,
            normalize_malaysian=normalize_malaysian,
            speed=speed,
            playback_speed=playback_speed,
            **sampling(temperature, top_p, top_k, repetition_penalty, seed, max_tokens),
            response_format="pcm" if stream else fmt,
            stream=stream,
        )
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
        status = f"{model}: TTFB {ttfb or 0:.3f} s, total {total:.2f} s, {len(received)} bytes"
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
        model: str | None,
        reference_audio: str | None,
        reference_text: str,
        generate_text: str,
        speed: float,
        temperature: float | None,
        top_p: float | None,
        top_k: float | None,
        repetition_penalty: float | None,
        seed: float | None,
        max_tokens: float | None,
        fmt: str,
    ) -> tuple[str | None, str]:
        """POST /v1/audio/vc (multipart), whole file: the audio path and a status line."""
        if not reference_audio:
            return None, "Upload or record a reference clip first."
        fields = given(
            model=model,
            reference_text=reference_text,
            generate_text=generate_text,
            speed=speed,
            **sampling(temperature, top_p, top_k, repetition_penalty, seed, max_tokens),
            response_format=fmt,
            stream="false",
        )
        form = {name: str(value) for name, value in fields.items()}
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
        self,
        base_url: str,
        model: str | None,
        catalog: Catalog,
        audio_sample: str | None,
        name: str,
        reference_text: str,
        consent: str,
    ) -> tuple[str, Any, Catalog]:
        """POST /v1/audio/voices: the voice object (or the error), the voice dropdown (the new voice
        chosen when ``model`` accepts it) and the catalog, refreshed after a registration."""
        if not audio_sample:
            return "Upload or record a clip first.", gr.update(), catalog
        form = given(name=name, reference_text=reference_text, consent=consent.strip())
        url = base_url.rstrip("/")
        try:
            with open(audio_sample, "rb") as clip:
                files = {"audio_sample": (Path(audio_sample).name, clip.read())}
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                response = await client.post(url + "/v1/audio/voices", data=form, files=files)
                models = await client.get(url + "/v1/models")
                voices = await client.get(url + "/v1/audio/voices")
        except (OSError, httpx.HTTPError) as exc:
            return f"Request failed: {exc!r}", gr.update(), catalog
        if response.status_code not in (200, 201):
            return error_message(response), gr.update(), catalog
        catalog = Catalog.of(models.json(), voices.json())
        names = catalog.voices_for(model)
        voice = gr.update(choices=names, value=name) if name in names else gr.update(choices=names)
        return json.dumps(response.json(), indent=2), voice, catalog


def sampling(
    temperature: float | None,
    top_p: float | None,
    top_k: float | None,
    repetition_penalty: float | None,
    seed: float | None,
    max_tokens: float | None,
) -> dict[str, Any]:
    """The request's sampling fields from the page's (blank ones left to the server)."""
    return given(
        temperature=temperature,
        top_p=top_p,
        top_k=None if top_k is None else int(top_k),
        repetition_penalty=repetition_penalty,
        seed=None if seed is None else int(seed),
        max_tokens=None if max_tokens is None else int(max_tokens),
    )


def build_ui(base_url: str, workdir: Path) -> gr.Blocks:
    """The page: connection row, model picker and sampling, then the four tabs."""
    client = DemoClient(workdir)
    with gr.Blocks(title="Streaming TTS demo", analytics_enabled=False, delete_cache=(600, 3600)) as demo:
        catalog = gr.State(Catalog())
        gr.Markdown(
            "# Streaming TTS demo\nA client of a running server: set its URL and check the connection."
        )
        with gr.Row():
            url = gr.Textbox(base_url, label="API base URL", scale=4)
            check = gr.Button("Check connection", scale=1)
        connection = gr.Markdown("Not checked yet.", elem_id="connection-status")
        with gr.Row():
            model = gr.Dropdown([], label="Model", elem_id="model-picker", scale=1)
            model_info = gr.Markdown(elem_id="model-info")
        with (
            gr.Accordion("Sampling (the chosen model's defaults; blank: the server's)", open=False),
            gr.Row(),
        ):
            temperature = gr.Number(None, label="Temperature", minimum=0.0, placeholder="server default")
            top_p = gr.Number(None, label="top_p", minimum=0.0, maximum=1.0, placeholder="server default")
            top_k = gr.Number(None, label="top_k", minimum=1, precision=0, placeholder="server default")
            repetition_penalty = gr.Number(None, label="Repetition penalty", placeholder="server default")
            seed = gr.Number(None, label="Seed", precision=0, placeholder="random")
        defaulted = [temperature, top_p, top_k, repetition_penalty]  # SAMPLING_FIELDS, in order
        sampling_fields = [*defaulted, seed]

        with gr.Tab("Speech"):
            text = gr.Textbox(
                "Hello! How can I help you today?", label="Text", lines=3, elem_id="speech-text"
            )
            with gr.Row():
                voice = gr.Dropdown([], label="Voice", allow_custom_value=True, elem_id="voice-picker")
                mode = gr.Radio(MODES, value="rule", label="Normalizer mode")
                language = gr.Dropdown(LANGUAGES, value="auto", label="Language")
                malaysian = gr.Checkbox(False, label="Malaysian entities (rule and spoken modes)")
            with gr.Row():
                speed = gr.Slider(0.5, 2.0, value=1.0, step=0.05, label="Speaking rate (speed)")
                playback = gr.Slider(0.1, 4.0, value=2.0, step=0.1, label="Playback speed (first window, s)")
                max_tokens = gr.Number(
                    None,
                    label="Max tokens (per generation)",
                    precision=0,
                    minimum=1,
                    elem_id="speech-max-tokens",
                )
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
            vc_off = gr.Markdown(NO_REFERENCE, visible=False, elem_id="vc-unavailable")
            vc_audio = gr.Audio(
                label="Reference clip (1-30 s)", type="filepath", sources=["upload", "microphone"]
            )
            vc_ref_text = gr.Textbox(label="Transcript of the reference clip")
            vc_text = gr.Textbox("Ye encik, apa yang saya boleh tolong?", label="Text to speak")
            with gr.Row():
                vc_speed = gr.Slider(0.5, 2.0, value=1.0, step=0.05, label="Speaking rate")
                vc_max_tokens = gr.Number(
                    None, label="Max tokens (per generation)", precision=0, minimum=1, elem_id="vc-max-tokens"
                )
                vc_fmt = gr.Dropdown(FORMATS, value="wav", label="Format")
            convert = gr.Button("Convert", variant="primary")
            vc_out = gr.Audio(label="Converted", type="filepath")
            vc_status = gr.Markdown()

        with gr.Tab("Register a voice"):
            reg_off = gr.Markdown(NO_REFERENCE, visible=False, elem_id="register-unavailable")
            reg_audio = gr.Audio(
                label="Clip of the voice (1-30 s)", type="filepath", sources=["upload", "microphone"]
            )
            with gr.Row():
                reg_name = gr.Textbox(label="Name (A-Z a-z 0-9 _ -)")
                reg_consent = gr.Textbox(label="Consent record (optional)")
            reg_text = gr.Textbox(label="Transcript of the clip")
            register = gr.Button("Register", variant="primary")
            reg_result = gr.Code(label="Result", language="json")

        follow = (
            client.follow_model,
            [model, catalog],
            [
                model_info,
                voice,
                *defaulted,
                max_tokens,
                vc_max_tokens,
                vc_ref_text,
                convert,
                vc_off,
                register,
                reg_off,
            ],
        )
        check.click(client.check, [url, model], [connection, model, catalog]).then(*follow)
        demo.load(client.check, [url, model], [connection, model, catalog]).then(*follow)
        model.input(*follow)
        speech_inputs = [url, model, text, voice, mode, language, malaysian, speed, playback]
        speak.click(
            client.speak,
            [*speech_inputs, *sampling_fields, max_tokens, fmt, stream],
            [streamed, whole, speech_status],
        )
        normalize.click(
            client.normalize,
            [url, norm_text, norm_mode, norm_language, norm_malaysian, norm_prompt],
            [norm_output, norm_status],
        )
        convert.click(
            client.convert,
            [url, model, vc_audio, vc_ref_text, vc_text, vc_speed, *sampling_fields, vc_max_tokens, vc_fmt],
            [vc_out, vc_status],
        )
        register.click(
            client.register,
            [url, model, catalog, reg_audio, reg_name, reg_text, reg_consent],
            [reg_result, voice, catalog],
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
