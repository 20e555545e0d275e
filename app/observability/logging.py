"""Log lines: one JSON object a line (or plain text), each with the request's ``trace_id`` and ``span_id``.

``configure_logging`` is called by the process entry point (``python -m app``), never by
``create_app``: logging is process-wide and tests build many apps. Nothing here logs request bodies,
headers or uploaded audio, so API keys and audio never reach a log line; the access line carries the
path without its query string.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from app.config import Settings
from app.observability.tracing import trace_ids

_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", "trace_id", "span_id", ...extra fields}``."""

    def format(self, record: logging.LogRecord) -> str:
        trace_id, span_id = trace_ids()
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": trace_id,
            "span_id": span_id,
        }
        for key, value in record.__dict__.items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``time level logger [trace_id] message``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        trace_id, _ = trace_ids()
        return line if trace_id is None else f"{line} trace_id={trace_id}"


def configure_logging(settings: Settings) -> None:
    """Root logging to stderr in LOG_FORMAT at LOG_LEVEL (uvicorn's loggers propagate to it)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if settings.LOG_FORMAT == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.LOG_LEVEL.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
