"""``python -m app``: serve with uvicorn on HOST:PORT from the settings."""

from __future__ import annotations

import logging

import uvicorn

from app.config import Settings
from app.main import create_app


def main() -> None:
    settings = Settings()
    logging.basicConfig(
        level=settings.LOG_LEVEL.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    uvicorn.run(create_app(settings), host=settings.HOST, port=settings.PORT, log_level=settings.LOG_LEVEL)


if __name__ == "__main__":
    main()
