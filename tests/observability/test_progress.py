"""Progress records of downloads and loads, their throttle, the terminal's status line and LOG_FORMAT."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import huggingface_hub
import pytest
from transformers.utils import logging as transformers_logging

from app import hub
from app.observability.logging import JsonFormatter, TerminalHandler, TextFormatter, log_format, make_handler
from app.observability.progress import (
    PROGRESS_LOGGER,
    ProgressBar,
    ProgressThrottle,
    human_amount,
    task,
    transformers_tqdm_hook,
)
from app.observability.startup import startup_step
from app.observability.startup_errors import ModelSourceError, StartupError
from tests.conftest import make_settings


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def progress_records() -> Iterator[list[logging.LogRecord]]:
    handler = Records()
    logger = logging.getLogger(PROGRESS_LOGGER)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_human_amounts() -> None:
    assert human_amount(999, "B") == "999 B"
    assert human_amount(1_500_000, "B") == "1.5 MB"
    assert human_amount(3.2e9, "B") == "3.2 GB"
    assert human_amount(12, "it") == "12"
    assert human_amount(7, "s") == "7 s"


def test_byte_bars_report_the_furthest_with_percentage(progress_records: list[logging.LogRecord]) -> None:
    with task("downloading a/b") as work:
        transfer = ProgressBar(total=3_000_000, unit="B", desc="Downloading bytes", name="hub.transfer")
        written = ProgressBar(total=3_000_000, unit="B", desc="Reconstructing")
        files = ProgressBar(total=2, desc="Fetching 2 files")
    transfer.update(1_000_000)
    written.update(1_500_000)
    files.update(1)
    written.refresh()
    for bar in (transfer, written, files):
        bar.close()
    assert work.last_report > 0
    last = progress_records[-1]
    assert last.getMessage() == f"downloading a/b: 1.5 MB of 3.0 MB (50%), {last.message.split(', ')[-1]}"
    assert (last.task, last.done, last.total, last.unit, last.percent) == (
        "downloading a/b",
        1_500_000,
        3_000_000,
        "B",
        50.0,
    )
    assert all(r.task == "downloading a/b" for r in progress_records)


def test_transformers_bars_report_and_its_off_switch_is_kept(
    progress_records: list[logging.LogRecord],
) -> None:
    with task("LM (TTS_MODEL=x)"):
        bar = transformers_tqdm_hook(
            transformers_logging.tqdm_lib.tqdm, (range(4),), {"desc": "Loading weights"}
        )
        assert isinstance(bar, ProgressBar)
        assert list(bar) == [0, 1, 2, 3]
    assert progress_records[-1].getMessage() == "LM (TTS_MODEL=x): 4 of 4 (100%)"
    empty = transformers_tqdm_hook(transformers_logging.EmptyTqdm, (range(2),), {})
    assert isinstance(empty, transformers_logging.EmptyTqdm)


def record(task_name: str, created: float, final: bool = False) -> logging.LogRecord:
    entry = logging.makeLogRecord({"name": PROGRESS_LOGGER, "msg": "m", "task": task_name, "final": final})
    entry.created = created
    return entry


def test_throttle_keeps_one_record_a_task_per_interval_and_every_final_one() -> None:
    throttle = ProgressThrottle(5.0)
    kept = [
        throttle.filter(record("a", 0.0)),
        throttle.filter(record("a", 1.0)),
        throttle.filter(record("b", 1.0)),
        throttle.filter(record("a", 5.0)),
        throttle.filter(record("a", 6.0, final=True)),
        throttle.filter(logging.makeLogRecord({"name": "app.synthesis.engine", "msg": "other"})),
    ]
    assert kept == [True, False, True, True, True, True]


def test_terminal_redraws_progress_in_place_and_erases_it_before_a_line() -> None:
    stream = Terminal()
    handler = TerminalHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.handle(logging.makeLogRecord({"name": PROGRESS_LOGGER, "msg": "dl: 10%", "final": False}))
    handler.handle(logging.makeLogRecord({"name": PROGRESS_LOGGER, "msg": "dl: 20%", "final": False}))
    handler.handle(logging.makeLogRecord({"name": "app.synthesis.engine", "msg": "loading codec"}))
    handler.handle(logging.makeLogRecord({"name": PROGRESS_LOGGER, "msg": "dl: done", "final": True}))
    erase = "\r\x1b[2K"
    assert stream.getvalue() == f"{erase}dl: 10%{erase}dl: 20%{erase}loading codec\ndl: done\n"


def test_log_format_auto_follows_the_stream() -> None:
    assert log_format("auto", Terminal()) == "text"
    assert log_format("auto", io.StringIO()) == "json"
    assert log_format("json", Terminal()) == "json"
    assert log_format("text", io.StringIO()) == "text"
    auto = make_settings()
    assert auto.LOG_FORMAT == "auto"
    terminal = make_handler(auto, Terminal())
    assert isinstance(terminal, TerminalHandler) and isinstance(terminal.formatter, TextFormatter)
    piped = make_handler(auto, io.StringIO())
    assert isinstance(piped.formatter, JsonFormatter)
    assert any(isinstance(f, ProgressThrottle) for f in piped.filters)


def test_json_leaves_out_uvicorn_colour_codes() -> None:
    entry = logging.makeLogRecord(
        {"name": "uvicorn.error", "msg": "Started server process [%d]", "args": (7,), "levelname": "INFO"}
    )
    entry.color_message = "Started server process [\x1b[36m%d\x1b[0m]"
    line = JsonFormatter().format(entry)
    assert "\\u001b" not in line and "\x1b" not in line
    assert json.loads(line)["message"] == "Started server process [7]"


async def test_startup_step_heartbeat_and_bars_from_its_threads(
    progress_records: list[logging.LogRecord],
) -> None:
    def load() -> None:
        time.sleep(0.35)
        bar = ProgressBar(total=10, unit="B")  # created in the worker thread: reports to the step's task
        bar.update(10)
        bar.close()

    async with startup_step("CODEC_MODEL", "/m", "codec decoder", tick_s=0.1):
        await asyncio.to_thread(load)
    messages = [r.getMessage() for r in progress_records]
    assert any(m.startswith("codec decoder (CODEC_MODEL=/m): ") and m.endswith(" s") for m in messages)
    assert messages[-2].startswith("codec decoder (CODEC_MODEL=/m): 10 B of 10 B (100%), ")
    assert messages[-1].startswith("codec decoder (CODEC_MODEL=/m): ready in ")
    assert progress_records[-1].final


async def test_startup_step_names_the_setting_of_a_failure() -> None:
    with pytest.raises(StartupError) as failure:
        async with startup_step("TTS_MODEL", "/lm", "LM"):
            raise ModelSourceError("the directory /lm has no config.json")
    assert str(failure.value).startswith(
        "cannot start: TTS_MODEL='/lm': the directory /lm has no config.json. Point TTS_MODEL at"
    )
    assert isinstance(failure.value.__cause__, ModelSourceError)


def test_hub_download_reports_bytes_then_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, progress_records: list[logging.LogRecord]
) -> None:
    def fake_snapshot_download(**kwargs: object) -> str:
        bar_class = kwargs["tqdm_class"]
        bar = bar_class(total=2_000_000, unit="B")
        bar.update(2_000_000)
        bar.close()
        return str(tmp_path)

    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    assert hub.resolve("owner/name", ["*.json"], [["config.json"]]) == tmp_path
    messages = [r.getMessage() for r in progress_records]
    assert messages[0] == "downloading owner/name: 0 B of 2.0 MB (0%)"
    assert messages[1].startswith("downloading owner/name: 2.0 MB of 2.0 MB (100%), ")
    assert messages[-1].startswith("downloading owner/name: done in ")


def test_hub_resolve_checks_a_directory(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    required = [["config.json"], ["*.safetensors"], ["tokenizer.json", "tokenizer.model"]]
    with pytest.raises(
        ModelSourceError, match=r"has no \*\.safetensors, no tokenizer\.json or tokenizer\.model$"
    ):
        hub.resolve(str(tmp_path), ["*"], required)
    with pytest.raises(ModelSourceError, match="is a file"):
        hub.resolve(str(tmp_path / "config.json"), ["*"])
    with pytest.raises(ModelSourceError, match="neither a directory nor a Hugging Face id"):
        hub.resolve(str(tmp_path / "missing" / "dir"), ["*"])
