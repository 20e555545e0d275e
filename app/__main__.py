"""``python -m app``: serve with uvicorn on HOST:PORT from the settings.

Logging is configured here (LOG_FORMAT, LOG_LEVEL), for the whole process; uvicorn's own access log is
off because the app writes one access line per request. On SIGTERM (or Ctrl-C) uvicorn stops
accepting connections, lets in-flight responses finish for up to SHUTDOWN_GRACE_S, cancels the rest,
then runs the lifespan shutdown that closes the engine (codec threads, LM sessions) and the exporters.
"""

from __future__ import annotations

import uvicorn

from app.config import Settings
from app.main import create_app
from app.observability.logging import configure_logging


def main() -> None:
    settings = Settings()
    configure_logging(settings)
    uvicorn.run(
        create_app(settings),
        host=settings.HOST,
        port=settings.PORT,
        log_level=settings.LOG_LEVEL,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=settings.SHUTDOWN_GRACE_S,
    )


if __name__ == "__main__":
    main()
