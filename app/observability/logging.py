"""Log lines: one JSON object a line (or plain text), each with the request's ``trace_id`` and ``span_id``.

``LOG_FORMAT=auto`` (the default) picks the reader at hand: plain text when stderr is a terminal, with
the progress of downloads and loads redrawn on one status line; JSON otherwise (containers, files, CI),
with one progress line a task every ``PROGRESS_INTERVAL_S``.

``configure_logging`` is called by the process entry point (``python -m app``), never by
``create_app``: logging is process-wide and tests build many apps. Nothing here logs request bodies,
headers or uploaded audio, so API keys and audio never reach a log line; the access line carries the
path without its query string.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any, TextIO

from app.core.settings import ServerSettings
from app.observability.progress import PROGRESS_LOGGER, ProgressThrottle
from app.observability.tracing import trace_ids

_RESERVED = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
_CHATTY_CLIENTS = ("httpx", "httpx2", "httpcore", "httpcore2")
_ERASE_LINE = "\r\x1b[2K"  # carriage return, then erase the whole line


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", "trace_id", "span_id", ...extra fields}``; uvicorn's
    ``color_message`` (the message with ANSI colour codes) is left out."""

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
            if key not in _RESERVED and not key.startswith("_") and key != "color_message":
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


class TerminalHandler(logging.StreamHandler):
    """Text lines for a person at a terminal; a progress record (not final) redraws one status line in
    place (its message only, cut to the terminal's width), and the next ordinary line first erases it."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._status_open = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.name == PROGRESS_LOGGER and not getattr(record, "final", False):
                self.stream.write(_ERASE_LINE + record.getMessage()[: self._width() - 1])
                self._status_open = True
            else:
                text = self.format(record)
                if self._status_open:
                    self.stream.write(_ERASE_LINE)
                    self._status_open = False
                self.stream.write(text + self.terminator)
            self.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    def _width(self) -> int:
        """Columns of the terminal (80 when the stream cannot say)."""
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or 80  # a new pty says 0
        except (AttributeError, OSError, ValueError):
            return 80


def log_format(setting: str, stream: TextIO) -> str:
    """``json`` or ``text``: LOG_FORMAT as set; ``auto`` is text when ``stream`` is a terminal."""
    if setting != "auto":
        return setting
    isatty = getattr(stream, "isatty", None)
    return "text" if isatty is not None and isatty() else "json"


def make_handler(settings: ServerSettings, stream: TextIO) -> logging.Handler:
    """The handler for ``stream``: in-place progress on a terminal in text, throttled progress otherwise."""
    fmt = log_format(settings.LOG_FORMAT, stream)
    isatty = getattr(stream, "isatty", None)
    handler: logging.Handler
    if fmt == "text" and isatty is not None and isatty():
        handler = TerminalHandler(stream)
    else:
        handler = logging.StreamHandler(stream)
        handler.addFilter(ProgressThrottle(settings.PROGRESS_INTERVAL_S))
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    return handler


def configure_logging(settings: ServerSettings, stream: TextIO | None = None) -> None:
    """Root logging to ``stream`` (stderr) in LOG_FORMAT at LOG_LEVEL (uvicorn's loggers propagate to it)."""
    handler = make_handler(settings, stream or sys.stderr)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.LOG_LEVEL.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    if settings.LOG_LEVEL != "debug":  # one INFO line per Hub request while downloading: debug only
        for name in _CHATTY_CLIENTS:
            logging.getLogger(name).setLevel(logging.WARNING)
