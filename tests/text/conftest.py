"""A fake OpenAI-compatible chat server and an LLMNormalizer client on it, shared by the text tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.text.llm import LLMNormalizer
from tests.fakes.fake_openai import FakeOpenAI

TEXT = "baki saya tinggal RM1,250.50 dan IC saya 960314875079"
SPOKEN = (
    "baki saya tinggal seribu dua ratus lima puluh ringgit lima puluh sen dan IC saya "
    "sembilan enam kosong tiga satu empat lapan tujuh lima kosong tujuh sembilan"
)
# user text -> what the fake model answers ({"normalized": ...})
REPLIES = {TEXT: SPOKEN, "Bayar RM5 sekarang!": "Bayar lima ringgit sekarang!"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeOpenAI]:
    server = FakeOpenAI(replies=REPLIES)
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def llm(fake: FakeOpenAI) -> AsyncIterator[LLMNormalizer]:
    client = LLMNormalizer(fake.url, fake.api_key, fake.model, timeout_s=2.0)
    await client.start()
    yield client
    await client.close()
