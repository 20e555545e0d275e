"""SSML end to end (real app, tiny NeuCodec, fake vLLM): breaks are exact digital silence at the right
place in every format at any speed, each element in each of the four languages, hostile documents."""

from __future__ import annotations

import io
import time
import tracemalloc

import av
import httpx
import numpy as np
import pytest
import soundfile as sf

from app.core.constants import SAMPLES_PER_TOKEN
from app.text.spoken import normalize_spoken
from app.text.spoken.core import speaker_for
from tests.api.conftest import http_settings, serve
from tests.api.test_speech_http import assert_openai_error
from tests.fakes.fake_vllm import FakeVLLM

SPEECH = "/v1/audio/speech"
NORMALIZE = "/v1/audio/normalize"
RATE = 24_000
FRAME = RATE // 50  # 20 ms: the tolerance of a lossy format
SEGMENT = 48 * SAMPLES_PER_TOKEN  # the fake's 48 codes per generation
LANGUAGES = ("en", "ms", "zh", "ta")
GREETINGS = {"en": "Hello there.", "ms": "Selamat pagi.", "zh": "你好。", "ta": "வணக்கம்."}
QUESTIONS = {"en": "How are you?", "ms": "Apa khabar?", "zh": "你好吗？", "ta": "எப்படி இருக்கிறீர்கள்?"}


def spoken(prompt: str) -> str:
    return prompt.rsplit("<|im_start|>husein: ", 1)[1].removesuffix("<|speech_start|>")


# lossy formats: where input sample 0 lands (AAC in ADTS cannot signal its priming), and how far a
# silence edge may move, in 24 kHz samples: one 20 ms frame for AAC; MP3 and Opus spread each edge by
# their transform's overlap with the noise next to it (measured: about 800-950 samples for MP3; for Opus,
# whose adaptive encoder decides by what came before, up to about 1,000 with the same samples at the
# edge, so three frames)
PRIMING = {"aac": 1024, "mp3": 0, "opus": 0}
EDGE = {"aac": FRAME, "mp3": 2 * FRAME, "opus": 3 * FRAME}
DEMUXER = {"flac": "flac", "aac": "aac", "mp3": "mp3", "opus": "ogg"}


def decode(data: bytes, fmt: str) -> np.ndarray:
    """The response body as float32 mono samples at 24 kHz (Opus, decoded at 48 kHz, taken every other)."""
    if fmt == "pcm":
        return np.frombuffer(data, "<i2").astype(np.float32) / 32768
    if fmt == "wav":
        return sf.read(io.BytesIO(data), dtype="float32")[0]
    out = []
    with av.open(io.BytesIO(data), format=DEMUXER[fmt]) as container:
        for frame in container.decode(audio=0):
            samples = frame.to_ndarray().reshape(-1)[:: frame.sample_rate // RATE]
            out.append(samples / 32768 if samples.dtype == np.int16 else samples)
    return np.concatenate(out).astype(np.float32)


def silent_runs(pcm: np.ndarray, floor: float = 0.0, shortest: int = 2 * FRAME) -> list[tuple[int, int]]:
    """(start, length) of each run of samples with ``|x| <= floor`` at least ``shortest`` long."""
    quiet = np.concatenate(([False], np.abs(pcm) <= floor, [False]))
    edges = np.flatnonzero(np.diff(quiet.astype(np.int8)))
    return [(int(a), int(b - a)) for a, b in zip(edges[::2], edges[1::2], strict=True) if b - a >= shortest]


def ssml(language: str, middle: str) -> str:
    return f'<speak xml:lang="{language}">{GREETINGS[language]}{middle}{QUESTIONS[language]}</speak>'


@pytest.mark.parametrize("speed", [1.0, 1.5])
@pytest.mark.parametrize(
    ("fmt", "stream"),
    [("pcm", True), ("wav", False), ("flac", True), ("aac", True), ("mp3", False), ("opus", True)],
)
async def test_a_700ms_break_is_700ms_of_digital_silence_after_the_first_sentence(
    app_url: str, fake_vllm: FakeVLLM, fmt: str, stream: bool, speed: float
) -> None:
    body = {
        "input": ssml("en", '<break time="700ms"/>'),
        "voice": "husein",
        "response_format": fmt,
        "speed": speed,
        "stream": stream,
    }
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(app_url + SPEECH, json=body)
    assert response.status_code == 200, response.text
    assert [spoken(r.body["prompt"]) for r in fake_vllm.requests] == ["Hello there.", "How are you?"]
    pcm = decode(response.content, fmt)
    head, pause = round(SEGMENT / speed), round(0.7 * RATE)
    if fmt in ("pcm", "wav", "flac"):  # lossless: exact zeros, exactly there
        assert silent_runs(pcm) == [(head, pause)]
        assert pcm.size == 2 * head + pause
    else:  # lossy: below -60 dBFS, each edge within the format's tolerance
        runs = silent_runs(pcm, floor=1e-3)
        assert len(runs) == 1, runs
        start, length = runs[0]
        assert abs(start - PRIMING[fmt] - head) <= EDGE[fmt] and abs(length - pause) <= 2 * EDGE[fmt], runs


@pytest.mark.parametrize("language", LANGUAGES)
async def test_break_prosody_and_sentences_in_each_language(
    app_url: str, fake_vllm: FakeVLLM, language: str
) -> None:
    middle = '<break strength="strong"/><prosody rate="150%"><s>' + QUESTIONS[language] + "</s></prosody>"
    body = {
        "input": ssml(language, middle),
        "voice": "husein",
        "response_format": "pcm",
        "stream_normalize": False,
    }
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(app_url + SPEECH, json=body)
    assert response.status_code == 200, response.text
    prompts = [spoken(r.body["prompt"]) for r in fake_vllm.requests]
    assert prompts == [GREETINGS[language], QUESTIONS[language], QUESTIONS[language]]
    pcm = decode(response.content, "pcm")
    fast = round(SEGMENT / 1.5)
    assert silent_runs(pcm) == [(SEGMENT, round(0.75 * RATE))]  # "strong": 750 ms
    assert pcm.size == SEGMENT + round(0.75 * RATE) + fast + SEGMENT  # the prosody span at 1.5x


async def normalized(
    client: httpx.AsyncClient, url: str, document: str, **fields: object
) -> dict[str, object]:
    response = await client.post(url + NORMALIZE, json={"input": document, **fields})
    assert response.status_code == 200, response.text
    result: dict[str, object] = response.json()
    return result


SAY_AS_SAMPLES = (
    ("cardinal", "1,250"),
    ("ordinal", "3rd"),
    ("telephone", "012-345 6789"),
    ("date", "12/09/2026"),
    ("time", "14:30"),
    ("currency", "RM12.50"),
)


@pytest.mark.parametrize("language", LANGUAGES)
async def test_say_as_reads_as_the_normalizer_does_for_that_class(app_url: str, language: str) -> None:
    speaker = speaker_for(language)
    async with httpx.AsyncClient(timeout=30) as client:
        for kind, text in SAY_AS_SAMPLES:
            document = f'<speak xml:lang="{language}"><say-as interpret-as="{kind}">{text}</say-as></speak>'
            result = await normalized(client, app_url, document)
            assert result["segments"] == [
                {"type": "speech", "text": normalize_spoken(text, language), "rate": 1.0}
            ]
        digits = await normalized(
            client,
            app_url,
            f'<speak xml:lang="{language}"><say-as interpret-as="digits">4821</say-as></speak>',
        )
        assert digits["output"] == speaker.digits("4821") != normalize_spoken("4821", language)
        spelled = await normalized(
            client,
            app_url,
            f'<speak xml:lang="{language}"><say-as interpret-as="characters">ab7</say-as></speak>',
        )
        assert spelled["output"] == speaker.join(["A", "B", speaker.digits("7")])
        verbatim = await normalized(
            client,
            app_url,
            f'<speak xml:lang="{language}"><say-as interpret-as="verbatim">A-1</say-as></speak>',
        )
        assert verbatim["output"] == speaker.join(["A", "dash", speaker.digits("1")])
        month_first = await normalized(
            client,
            app_url,
            f'<speak xml:lang="{language}">'
            '<say-as interpret-as="date" format="mdy">9/12/2026</say-as></speak>',
        )
        assert month_first["output"] == speaker.month_first_date(12, 9, 2026)


@pytest.mark.parametrize("language", LANGUAGES)
async def test_sub_lang_p_s_and_breaks_in_normalize_output(app_url: str, language: str) -> None:
    other = "ms" if language != "ms" else "en"
    document = (
        f'<speak xml:lang="{language}"><p>{GREETINGS[language]}</p><s><sub alias="Jalan">Jln.</sub> 7</s>'
        f'<break time="1.2s"/><lang xml:lang="{other}">12</lang> '
        f"<emphasis>{QUESTIONS[language]}</emphasis></speak>"
    )
    async with httpx.AsyncClient(timeout=30) as client:
        result = await normalized(client, app_url, document, mode="spoken")
    seven, twelve = normalize_spoken("7", language), normalize_spoken("12", other)
    stop = "。" if language == "zh" and not seven.isascii() else "."
    first = f"{GREETINGS[language]} Jalan {seven}{stop}"
    second = f"{twelve} {QUESTIONS[language]}"
    assert result["segments"] == [
        {"type": "speech", "text": first, "rate": 1.0},
        {"type": "break", "ms": 1200},
        {"type": "speech", "text": second, "rate": 1.0},
    ]
    assert result["output"] == f'{first} <break time="1200ms"/> {second}'
    assert result["ignored"] == ["emphasis"]
    assert result["mode"] == "spoken"


async def test_plain_text_keeps_the_normalize_response_shape(app_url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        result = await normalized(client, app_url, "Pay RM12.50 <b>now</b>", mode="spoken")
    assert result == {"output": "Pay twelve ringgit fifty sen now", "mode": "spoken"}


async def test_what_was_ignored_is_in_a_header_and_the_sse_done_event(app_url: str) -> None:
    document = '<speak>Hi <emphasis level="strong">there</emphasis><audio src="x.wav">beep</audio>.</speak>'
    async with httpx.AsyncClient(timeout=30) as client:
        raw = await client.post(app_url + SPEECH, json={"input": document, "voice": "husein"})
        sse = await client.post(app_url + SPEECH, json={"input": document, "stream_format": "sse"})
    assert raw.status_code == 200 and raw.headers["x-ssml-ignored"] == "emphasis, audio"
    done = [line for line in sse.text.splitlines() if '"speech.audio.done"' in line]
    assert '"ssml_ignored":["emphasis","audio"]' in done[0]


MALFORMED = (
    ("<speak>Hello <break time='1s'></speak>", "line 1, column 33"),
    ("<speak>\n  <p>one\n  </s>\n</speak>", "line 3, column 5"),
    ("<speak>a &nbsp; b</speak>", "line 1, column 10"),
)


@pytest.mark.parametrize(("document", "where"), MALFORMED)
async def test_a_malformed_document_is_a_400_that_says_where(
    app_url: str, fake_vllm: FakeVLLM, document: str, where: str
) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(app_url + SPEECH, json={"input": document})
    error = assert_openai_error(response, 400, "input")
    assert where in error["message"] and error["code"] == "invalid_ssml"
    assert not fake_vllm.requests


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(
        f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i > 1 else "&lol;" * 10}">'
        for i in range(1, 10)
    )
    + "]><speak>&lol9;</speak>"
)
EXTERNAL_ENTITY = (
    '<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><speak>&xxe;</speak>'
)
NESTED = "<speak>" + "<s>" * 10_000 + "deep" + "</s>" * 10_000 + "</speak>"
BREAKS = "<speak>" + 'a<break time="10ms"/>' * 1000 + "</speak>"
HOSTILE = {
    "billion_laughs": BILLION_LAUGHS,
    "external_entity": EXTERNAL_ENTITY,
    "nested": NESTED,
    "breaks": BREAKS,
}


@pytest.mark.parametrize("max_chars", [16384, 200_000])
async def test_hostile_documents_are_a_quick_400_using_no_more_memory_than_a_plain_request(
    tiny_codec_dir: object, fake_vllm: FakeVLLM, max_chars: int
) -> None:
    settings = http_settings(tiny_codec_dir, fake_vllm.url, SSML_MAX_CHARS=max_chars, MAX_INPUT_CHARS=100_000)  # type: ignore[arg-type]
    async with serve(settings) as url, httpx.AsyncClient(timeout=30) as client:
        plain = "word " * (len(NESTED) // 5)
        await client.post(url + NORMALIZE, json={"input": plain})  # warm up: first-use caches
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            assert (await client.post(url + NORMALIZE, json={"input": plain})).status_code == 200
            plain_peak = tracemalloc.get_traced_memory()[1]
            for name, document in HOSTILE.items():
                tracemalloc.reset_peak()
                started = time.perf_counter()
                response = await client.post(url + SPEECH, json={"input": document})
                elapsed = time.perf_counter() - started
                peak = tracemalloc.get_traced_memory()[1]
                error = assert_openai_error(response, 400, "input")
                assert error["code"] == "invalid_ssml", (name, error)
                assert elapsed < 1.0, (name, elapsed)
                assert peak <= plain_peak, (name, peak, plain_peak)
        finally:
            tracemalloc.stop()
    assert not fake_vllm.requests
