"""Application factory: ``create_app(settings)``; the lifespan starts and closes the Engine.

Run with ``uvicorn --factory app.main:create_app`` (or ``python -m app``). Importing this module does
no work: settings are read and models loaded only when the app starts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.api import catalog, health, interleave, normalize, speech, vc, voices
from app.api.errors import install_error_handlers
from app.api.middleware import RequestIdMiddleware
from app.api.serving import SpeechService
from app.api.uploads import install_upload_limit
from app.config import Settings
from app.engine import Engine

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app for ``settings`` (default: the environment); nothing starts before the lifespan."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        eng = Engine.from_settings(settings)
        app.state.engine = eng
        app.state.speech = SpeechService(eng)
        app.state.started_at = int(time.time())
        try:
            await eng.start()
            log.info("engine ready: LM %s, codec %s", eng.source.name, settings.CODEC_MODEL)
            yield
        finally:
            await eng.close()

    app = FastAPI(
        title="Streaming TTS server",
        version="0.1.0",
        description="OpenAI-compatible streaming text-to-speech: speech-token LM + NeuCodec.",
        lifespan=lifespan,
    )
    install_upload_limit(app, settings.MAX_UPLOAD_BYTES)
    app.add_middleware(RequestIdMiddleware)
    install_error_handlers(app)
    for module in (speech, vc, voices, normalize, interleave, catalog, health):
        app.include_router(module.router)
    return app
