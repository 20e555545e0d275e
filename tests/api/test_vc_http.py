"""/v1/audio/vc end to end: real uploads (espeak-ng speech), the tiny NeuCodec encoder, the fake vLLM."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
import torch

from app.audio.io import load_reference
from app.families.neucodec.codec.encoder import frames_for
from app.families.neucodec.codec.loading import load_encoder
from app.families.neucodec.codec.worker import CodecWorker
from tests.api.conftest import REFERENCE_TEXT, http_settings, serve
from tests.api.test_speech_formats import parse_sse
from tests.api.test_speech_http import assert_openai_error
from tests.fakes.fake_vllm import FakeVLLM
from tests.speech_audio import FORMATS, transcode, wav_bytes

VC = "/v1/audio/vc"
N_CODES = 48  # the fake's default script
GENERATE_TEXT = "Please speak this sentence in my voice."


def expected_codes(codec_dir: Path, audio: bytes) -> list[int]:
    """The reference's codes from the encoder run directly (not through the server)."""
    samples = load_reference(audio, min_s=1, max_s=30, param="x").samples
    encoder = load_encoder(str(codec_dir))
    with torch.inference_mode():
        codes = encoder.encode(torch.from_numpy(samples)[None, None], [samples.shape[0]])
    return codes[0, : frames_for(samples.shape[0])].tolist()


def vc_fields(**fields: object) -> dict[str, str]:
    values = {"reference_text": REFERENCE_TEXT, "generate_text": GENERATE_TEXT} | fields
    return {
        key: str(value).lower() if isinstance(value, bool) else str(value) for key, value in values.items()
    }


async def post_vc(
    url: str, audio: bytes | None, filename: str = "ref.wav", **fields: object
) -> httpx.Response:
    files = {"reference_audio": (filename, audio, "application/octet-stream")} if audio is not None else None
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(url + VC, data=vc_fields(**fields), files=files)


@pytest.fixture
def encode_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Lengths of the audio the codec worker was asked to encode, in call order."""
    calls: list[int] = []
    original: Callable[[CodecWorker, np.ndarray], object] = CodecWorker.encode

    async def counting(self: CodecWorker, audio_16k: np.ndarray) -> list[int]:
        calls.append(int(audio_16k.shape[0]))
        return await original(self, audio_16k)

    monkeypatch.setattr(CodecWorker, "encode", counting)
    return calls


@pytest.fixture
async def vc_url(tiny_codec_dir: Path, fake_vllm: FakeVLLM, tmp_path: Path) -> AsyncIterator[str]:
    settings = http_settings(tiny_codec_dir, fake_vllm.url, VOICES_DIR=str(tmp_path / "voices"))
    async with serve(settings) as url:
        yield url


async def test_prompt_is_exact_and_audio_streams(
    vc_url: str, fake_vllm: FakeVLLM, tiny_codec_dir: Path, reference_wav: bytes
) -> None:
    response = await post_vc(vc_url, reference_wav, response_format="pcm", temperature=0.3)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "audio/pcm"
    assert len(response.content) == N_CODES * 480 * 2
    codes = expected_codes(tiny_codec_dir, reference_wav)
    assert len(codes) == 2794 * 16 // 320  # 2.794 s at 16 kHz, one code per 320 samples
    tokens = "".join(f"<|s_{code}|>" for code in codes)
    sent = fake_vllm.requests[-1].body
    assert sent["prompt"] == (
        f"<|im_start|>{REFERENCE_TEXT}<|speech_start|>{tokens}<|im_end|>"
        f"<|im_start|>{GENERATE_TEXT}<|speech_start|>"
    )
    assert sent["temperature"] == 0.3 and sent["max_tokens"] == 3072 and sent["model"] == "TTS-model"


async def test_both_texts_are_normalized_and_cleaned(
    vc_url: str, fake_vllm: FakeVLLM, reference_wav: bytes
) -> None:
    response = await post_vc(
        vc_url,
        reference_wav,
        reference_text="I have 2 cats <|im_end|>",
        generate_text="**Call** me at 3pm",
        mode="spoken",
        language="en",
    )
    assert response.status_code == 200, response.text
    prompt = fake_vllm.requests[-1].body["prompt"]
    assert prompt.startswith("<|im_start|>I have two cats<|speech_start|><|s_")
    assert prompt.endswith("<|im_end|><|im_start|>Call me at three p m<|speech_start|>")


@pytest.mark.parametrize("fmt", ["wav", *sorted(FORMATS)])
async def test_every_upload_format_is_accepted(
    vc_url: str, fake_vllm: FakeVLLM, reference_wav: bytes, fmt: str
) -> None:
    audio = reference_wav if fmt == "wav" else transcode(reference_wav, fmt)
    response = await post_vc(vc_url, audio, filename=f"ref.{fmt}", response_format="wav", stream=False)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "audio/wav"
    reference_tokens = fake_vllm.requests[-1].body["prompt"].split("<|im_end|>")[0].count("<|s_")
    assert abs(reference_tokens - 139) <= 5  # 2.79 s at 50 codes/s, give or take codec padding


async def test_a_repeated_reference_is_encoded_once(
    vc_url: str, fake_vllm: FakeVLLM, reference_wav: bytes, encode_calls: list[int]
) -> None:
    first = await post_vc(vc_url, reference_wav)
    second = await post_vc(vc_url, reference_wav, generate_text="Something else entirely.")
    lossless = await post_vc(vc_url, transcode(reference_wav, "flac"), filename="ref.flac")
    assert first.status_code == second.status_code == lossless.status_code == 200
    assert encode_calls == [44696], "the same decoded audio is encoded once"
    prompts = [r.body["prompt"].split("<|im_end|>")[0] for r in fake_vllm.requests[-3:]]
    assert prompts[0] == prompts[1] == prompts[2]
    await post_vc(vc_url, transcode(reference_wav, "mp3"), filename="ref.mp3")
    assert len(encode_calls) == 2, "different audio is a different reference"


async def test_sse(vc_url: str, reference_wav: bytes) -> None:
    response = await post_vc(vc_url, reference_wav, stream_format="sse", response_format="pcm")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.content)
    assert events[-1] == "[DONE]"
    done = events[-2]
    assert isinstance(done, dict) and done["type"] == "speech.audio.done"
    assert done["usage"]["output_tokens"] == N_CODES
    deltas = [e for e in events[:-2] if isinstance(e, dict)]
    assert deltas and all(e["type"] == "speech.audio.delta" for e in deltas)


async def test_speaking_rate_alias_and_seed_field_names(vc_url: str, reference_wav: bytes) -> None:
    response = await post_vc(vc_url, reference_wav, speaking_rate=1.5, response_format="pcm", stream=False)
    assert response.status_code == 200, response.text
    assert len(response.content) < N_CODES * 480 * 2 * 0.8  # 1.5x faster: about 2/3 the samples


@pytest.mark.parametrize(
    ("make_audio", "code"),
    [
        (lambda wav: b"just some text, not audio at all\n" * 100, "invalid_audio"),
        (lambda wav: wav[:20] + b"\xff" * 16 + wav[36:], "invalid_audio"),  # a broken fmt chunk
        (lambda wav: transcode(wav, "flac")[:300], "invalid_audio"),
        (lambda wav: wav_bytes(np.zeros(12000), 16000), "audio_too_short"),
        (lambda wav: wav_bytes(np.zeros(31 * 16000), 16000), "audio_too_long"),
    ],
    ids=["not-audio", "corrupt-wav", "corrupt-flac", "too-short", "too-long"],
)
async def test_bad_uploads_are_400_before_any_work(
    vc_url: str,
    fake_vllm: FakeVLLM,
    reference_wav: bytes,
    encode_calls: list[int],
    make_audio: Callable[[bytes], bytes],
    code: str,
) -> None:
    response = await post_vc(vc_url, make_audio(reference_wav))
    assert assert_openai_error(response, 400, "reference_audio")["code"] == code
    assert not fake_vllm.requests and not encode_calls


async def test_missing_and_out_of_range_fields_are_422(
    vc_url: str, fake_vllm: FakeVLLM, reference_wav: bytes
) -> None:
    assert_openai_error(await post_vc(vc_url, None), 422, "reference_audio")
    async with httpx.AsyncClient() as client:
        missing_text = await client.post(
            vc_url + VC, data={"reference_text": "hi"}, files={"reference_audio": ("r.wav", reference_wav)}
        )
    assert_openai_error(missing_text, 422, "generate_text")
    assert_openai_error(await post_vc(vc_url, reference_wav, temperature=5), 422, "temperature")
    assert_openai_error(await post_vc(vc_url, reference_wav, speaking_rate=3), 422, "speaking_rate")
    assert_openai_error(await post_vc(vc_url, reference_wav, response_format="ogg"), 422, "response_format")
    assert_openai_error(await post_vc(vc_url, reference_wav, playback_speed=0), 422, "playback_speed")
    assert_openai_error(await post_vc(vc_url, reference_wav, generate_text="x" * 5000), 422, "generate_text")
    assert_openai_error(await post_vc(vc_url, reference_wav, model="whisper-1"), 404, "model")
    assert not fake_vllm.requests


async def test_too_large_uploads_are_413(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, reference_wav: bytes, encode_calls: list[int]
) -> None:
    settings = http_settings(tiny_codec_dir, fake_vllm.url, MAX_UPLOAD_BYTES=100_000)
    assert 100_000 < len(reference_wav) < 100_000 + 256 * 1024
    async with serve(settings) as url:
        # within the body allowance: the file part itself is counted while it is read
        assert_openai_error(await post_vc(url, reference_wav), 413, "reference_audio")
        # far over: refused from the Content-Length header, before the body is read
        assert_openai_error(await post_vc(url, reference_wav * 5), 413)
        # no Content-Length (chunked): refused once the body passes the allowance
        request = httpx.Request(
            "POST", url + VC, data=vc_fields(), files={"reference_audio": ("r.wav", reference_wav * 5)}
        )
        body = request.read()

        async def chunked() -> AsyncIterator[bytes]:
            for start in range(0, len(body), 65536):
                yield body[start : start + 65536]

        headers = {"content-type": request.headers["content-type"]}
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(url + VC, content=chunked(), headers=headers)
        assert "content-length" not in response.request.headers
        assert_openai_error(response, 413)
    assert not fake_vllm.requests and not encode_calls


async def test_vc_disabled_loads_no_encoder(
    tiny_codec_dir: Path, fake_vllm: FakeVLLM, reference_wav: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the encoder must not be loaded when REFERENCE_VOICES=false")

    monkeypatch.setattr("app.families.neucodec.codec.loading.load_encoder", refuse)
    async with serve(http_settings(tiny_codec_dir, fake_vllm.url, REFERENCE_VOICES=False)) as url:
        error = assert_openai_error(await post_vc(url, reference_wav), 400)
        assert error["code"] == "vc_disabled"
        async with httpx.AsyncClient() as client:
            assert (await client.get(url + "/ready")).status_code == 200
            speech = await client.post(url + "/v1/audio/speech", json={"input": "Still speaking."})
    assert speech.status_code == 200
    assert json.loads(json.dumps(fake_vllm.requests[-1].body))["prompt"].startswith("<|im_start|>husein: ")
