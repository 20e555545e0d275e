"""``python -m app``: serve with uvicorn on HOST:PORT from the settings (the container runs this too).

Logging is configured here (LOG_FORMAT, LOG_LEVEL), for the whole process; uvicorn's own access log is
off because the app writes one access line per request. On SIGTERM (or Ctrl-C) uvicorn stops
accepting connections, lets in-flight responses finish for up to SHUTDOWN_GRACE_S, cancels the rest,
then runs the lifespan shutdown that closes the engine (codec threads, LM sessions) and the exporters.
A connection that does not send its request headers within HEADER_READ_TIMEOUT_S is closed (408).
WORKERS > 1 starts that many processes; each configures its logging and builds its own app.
"""

from __future__ import annotations

from typing import Any

import uvicorn
from fastapi import FastAPI

from app.api.header_timeout import header_timeout_protocol
from app.config import Settings
from app.main import create_app
from app.observability.logging import configure_logging


def server_options(settings: Settings) -> dict[str, Any]:
    """The uvicorn settings this server runs with (besides the app), from ``settings``."""
    return {
        "host": settings.HOST,
        "port": settings.PORT,
        "log_level": settings.LOG_LEVEL,
        "log_config": None,
        "access_log": False,
        "timeout_graceful_shutdown": settings.SHUTDOWN_GRACE_S,
        "http": header_timeout_protocol(settings.HEADER_READ_TIMEOUT_S),
    }


def worker_app() -> FastAPI:
    """The app of one worker process (``WORKERS`` > 1): logging configured in that process."""
    settings = Settings()
    configure_logging(settings)
    return create_app(settings)


def main() -> None:
    settings = Settings()
    configure_logging(settings)
    if settings.WORKERS > 1:
        uvicorn.run(
            "app.__main__:worker_app", factory=True, workers=settings.WORKERS, **server_options(settings)
        )
        return
    uvicorn.run(create_app(settings), **server_options(settings))


if __name__ == "__main__":
    main()
