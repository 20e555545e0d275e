"""Log lines: one JSON object a line (or plain text), each with the request's ``trace_id`` and ``span_id``.

``LOG_FORMAT=auto`` (the default) picks the reader at hand: plain text when stderr is a terminal, with
the progress of downloads and loads redrawn on one status line; JSON otherwise (containers, files, CI),
with one progress line a task every ``PROGRESS_INTERVAL_S``.

``configure_logging`` is called by the process entry point (``python -m app``), never by
``create_app``: logging is process-wide and tests build many apps. Nothing here logs request bodies,
headers or uploaded audio, so API keys and audio never reach a log line; the access line carries the
path without its query string.

Log lines cannot be forged or coloured by what a client sends (a path with ``%0A`` or ``%1B``, a voice
name, a header): in the text format every field has its control characters (C0, DEL, C1, and the
Unicode line and paragraph separators) escaped as ``\\xNN`` / ``\\uNNNN``, so a record is one line,
and a traceback's lines, kept as lines, are indented, so that a record's first line is the only one
that starts at column 0; the JSON format escapes the same characters inside its strings.
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
_CONTROLS = [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]
_TEXT_ESCAPES = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in _CONTROLS}
_JSON_ESCAPES = {c: f"\\u{c:04x}" for c in _CONTROLS}  # json.dumps escapes C0 itself; C1 and the rest not
TRACEBACK_INDENT = "  "


def escape_controls(text: str) -> str:
    """``text`` with every control character (and U+2028/U+2029) written as ``\\xNN`` or ``\\uNNNN``."""
    return text.translate(_TEXT_ESCAPES)


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
        # inside a JSON string (the only place these can be) a \\u escape reads back as the character
        return json.dumps(entry, default=str, ensure_ascii=False).translate(_JSON_ESCAPES)


class TextFormatter(logging.Formatter):
    """``time level logger message [trace_id=...]`` on one line, every field's control characters
    escaped; then the traceback, if any, its lines indented by ``TRACEBACK_INDENT``."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = record.getMessage()
        fields = [self.formatTime(record), record.levelname, record.name, record.message]
        trace_id, _ = trace_ids()
        if trace_id is not None:
            fields.append(f"trace_id={trace_id}")
        lines = [escape_controls(" ".join(fields))]
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        for block in (record.exc_text, record.stack_info and self.formatStack(record.stack_info)):
            if block:
                lines += [TRACEBACK_INDENT + escape_controls(line) for line in block.split("\n")]
        return "\n".join(lines)


class TerminalHandler(logging.StreamHandler):
    """Text lines for a person at a terminal; a progress record (not final) redraws one status line in
    place (its message only, cut to the terminal's width), and the next ordinary line first erases it."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._status_open = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.name == PROGRESS_LOGGER and not getattr(record, "final", False):
                self.stream.write(_ERASE_LINE + escape_controls(record.getMessage())[: self._width() - 1])
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
