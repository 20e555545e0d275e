"""Application factory: ``create_app(settings, *, engine=None)``; the lifespan starts and closes the Engine.

Run with ``uvicorn --factory app.main:create_app`` (or ``python -m app``). Importing this module does
no work: settings are read and models loaded only when the app starts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app.api import (
    cartesia,
    catalog,
    health,
    interleave,
    lexicons,
    normalize,
    ops,
    realtime,
    speech,
    vc,
    voices,
)
from app.api.admission import Admission, AdmissionMiddleware, Viability
from app.api.auth import ApiKeys, AuthMiddleware
from app.api.docs_pages import install_docs
from app.api.edge import install_edge
from app.api.errors import install_error_handlers
from app.api.forms import install_form_errors
from app.api.middleware import RequestIdMiddleware
from app.api.uploads import install_upload_limit
from app.audio.decoder_pool import ReferenceDecoder
from app.config import Settings
from app.core.routes import SYNTHESIS_PATHS
from app.core.settings import ServerSettings
from app.observability.metrics import Metrics
from app.observability.requests import RequestMiddleware
from app.observability.tracing import Tracing
from app.sessions.session import SessionLimits, Sessions
from app.synthesis.engine import Engine
from app.synthesis.service import SpeechService

log = logging.getLogger(__name__)


def create_app(settings: ServerSettings | None = None, *, engine: Engine | None = None) -> FastAPI:
    """Build the app for ``settings`` (default: the environment); nothing starts before the lifespan.

    ``engine`` replaces the one the settings describe (tests inject fakes through it: another model
    family, a scripted LM); it is started and closed by the app's lifespan all the same.
    """
    settings = settings or Settings()
    tracing = Tracing.from_settings(settings)
    metrics = engine.metrics if engine is not None else Metrics()
    api_keys = ApiKeys(settings.API_KEYS, settings.ADMIN_API_KEYS)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await api_keys.load()
        tracing.start()
        eng = engine if engine is not None else Engine.from_settings(settings, metrics)
        app.state.engine = eng
        decoder = ReferenceDecoder(
            threads=settings.UPLOAD_DECODE_THREADS,
            timeout_s=settings.UPLOAD_DECODE_TIMEOUT_S,
            min_s=settings.MIN_REFERENCE_S,
            max_s=settings.MAX_REFERENCE_S,
        )
        app.state.speech = SpeechService(eng, decoder)
        app.state.started_at = int(time.time())
        try:
            await eng.start()
            log.info("engine ready: models %s", ", ".join(eng.model_ids()))
            yield
        finally:
            decoder.close()
            await eng.close()
            metrics.close()
            await asyncio.to_thread(tracing.shutdown)
            log.info("engine closed")

    app = FastAPI(
        title="Streaming TTS server",
        version="0.1.0",
        description="OpenAI-compatible streaming text-to-speech: speech-token LM + NeuCodec.",
        lifespan=lifespan,
        docs_url=None,  # /docs and /scalar, with their assets served here: install_docs
        redoc_url=None,
    )
    app.state.tracing = tracing
    app.state.metrics = metrics
    install_upload_limit(app, settings.MAX_UPLOAD_BYTES)
    viability = None
    if settings.VIABILITY_CHECK:
        viability = Viability(settings.VIABILITY_LM_FLOOR, settings.VIABILITY_WAIT_S)
    admission = Admission(
        settings.MAX_CONCURRENT_STREAMS,
        settings.MAX_QUEUED_STREAMS,
        settings.QUEUE_WAIT_S,
        metrics,
        viability,
    )
    app.state.admission = admission  # realtime contexts hold its slots too
    app.state.sessions = Sessions(
        settings.REALTIME_MAX_SESSIONS, settings.REALTIME_MAX_SESSIONS_PER_KEY, metrics
    )
    app.state.session_limits = SessionLimits.from_settings(settings)
    app.add_middleware(AdmissionMiddleware, admission=admission)
    app.add_middleware(AuthMiddleware, keys=api_keys)
    install_edge(app, settings)
    app.add_middleware(RequestIdMiddleware)
    app.add_middleware(RequestMiddleware, tracing=tracing, metrics=metrics)
    tracing.install(app)  # outermost: the server span covers everything below
    install_error_handlers(app)
    install_form_errors(app)
    for module in (
        speech,
        vc,
        voices,
        lexicons,
        normalize,
        interleave,
        catalog,
        health,
        ops,
        cartesia,
        realtime,
    ):
        app.include_router(module.router)
    ops.install_openapi(app, SYNTHESIS_PATHS)
    install_docs(app)
    return app
