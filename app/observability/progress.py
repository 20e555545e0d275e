"""Progress of long startup work (downloads, model loads) as log records on the ``app.progress`` logger.

A *task* is one piece of work with a label ("downloading neuphonic/neucodec (CODEC_MODEL)"). It is
entered with ``task(label)``, which sets a context variable: work started inside it (including
``asyncio.to_thread`` calls, which copy the context) reports to it. Two sources report:

- ``ProgressBar``, a ``tqdm`` whose display is a log record instead of a terminal line: pass it as
  ``tqdm_class`` to ``huggingface_hub.snapshot_download`` or return it from transformers' tqdm hook,
  and bytes, percentage and rate of the download or the load arrive as records. A task with byte
  bars reports the furthest of them (the Hub's transfer and write bars count the same bytes; its
  file-count bar is left out); otherwise the most recently updated bar.
- ``heartbeat(task, tick_s)``, for work that has no bar: the elapsed time, while no bar reported.

Every record carries ``task``, ``done``, ``total``, ``unit``, ``percent``, ``elapsed_s`` and ``final``.
How often they are shown is the handler's business (``app.observability.logging``): a terminal redraws
one status line in place; a JSON or file handler keeps one record a task every ``PROGRESS_INTERVAL_S``
(``ProgressThrottle``) and every final one.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import io
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tqdm.std import tqdm

PROGRESS_LOGGER = "app.progress"
log = logging.getLogger(PROGRESS_LOGGER)


def human_amount(amount: float, unit: str) -> str:
    """``1.2 GB`` for bytes (powers of 1000), ``7 s`` for other units, a bare ``12`` for tqdm's "it"."""
    if unit == "it":  # tqdm's default unit: a count of steps
        return f"{amount:.0f}"
    if unit != "B" or abs(amount) < 1000:
        return f"{amount:.0f} {unit}"
    prefixes = iter("kMGT")
    prefix = next(prefixes)
    amount /= 1000
    while abs(amount) >= 1000 and prefix != "T":
        prefix = next(prefixes)
        amount /= 1000
    return f"{amount:.1f} {prefix}B"


@dataclass(eq=False)
class Task:
    """One piece of startup work and the bars reporting to it (``ProgressBar`` registers itself)."""

    label: str
    started: float = field(default_factory=time.monotonic)
    last_report: float = 0.0  # monotonic time of the last record from a bar (0: none yet)
    finished: bool = False
    parent: Task | None = None  # the task this one runs inside: its heartbeat stays quiet meanwhile
    bars: list[ProgressBar] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def emit(self, done: float, total: float | None, unit: str) -> None:
        """Log one progress record for this task."""
        elapsed = self.elapsed()
        percent = round(100.0 * done / total, 1) if total else None
        amount = human_amount(done, unit)
        if total:
            amount += f" of {human_amount(total, unit)} ({percent:.0f}%)"
        if unit == "B" and elapsed > 0 and done:
            amount += f", {human_amount(done / elapsed, unit)}/s"
        log.info(
            "%s: %s",
            self.label,
            amount,
            extra={
                "task": self.label,
                "done": done,
                "total": total,
                "unit": unit,
                "percent": percent,
                "elapsed_s": round(elapsed, 1),
                "final": False,
            },
        )

    def bar_moved(self, bar: ProgressBar) -> None:
        """Called by a bar when it would redraw: report this task's furthest byte bar (or ``bar``)."""
        with self.lock:
            if self.finished:  # a bar closed after the task's final record: nothing new to say
                return
            byte_bars = [b for b in self.bars if b.unit == "B"]
            shown = max(byte_bars, key=lambda b: (b.n, b.total or 0)) if byte_bars else bar
            if not shown.n and not shown.total:  # nothing known yet (the Hub's bars start empty)
                return
        now = time.monotonic()
        reported: Task | None = self
        while reported is not None:
            reported.last_report = now
            reported = reported.parent
        self.emit(shown.n, shown.total, shown.unit)

    def moved(self) -> bool:
        """True once any of its bars counted something (a cached download counts nothing)."""
        with self.lock:
            return any(bar.n for bar in self.bars)

    def done(self, message: str) -> None:
        """The final record: ``message`` (e.g. "loaded in 3.1 s") replaces the status line; the task's
        bars report nothing after it."""
        with self.lock:
            self.finished = True
        log.info(
            "%s: %s",
            self.label,
            message,
            extra={
                "task": self.label,
                "done": None,
                "total": None,
                "unit": None,
                "percent": 100.0,
                "elapsed_s": round(self.elapsed(), 1),
                "final": True,
            },
        )


_current: contextvars.ContextVar[Task | None] = contextvars.ContextVar("progress_task", default=None)


def current_task() -> Task | None:
    """The task that work started here reports to, or None."""
    return _current.get()


@contextlib.contextmanager
def task(label: str) -> Iterator[Task]:
    """Make a new task current for the block (and for threads started from it with copied context);
    it runs inside the current task, if any."""
    entered = Task(label, parent=_current.get())
    token = _current.set(entered)
    try:
        yield entered
    finally:
        _current.reset(token)


async def heartbeat(work: Task, tick_s: float = 1.0) -> None:
    """Until cancelled: every ``tick_s``, the elapsed time of ``work`` while none of its bars reported."""
    while True:
        await asyncio.sleep(tick_s)
        if time.monotonic() - work.last_report >= tick_s:
            work.emit(round(work.elapsed()), None, "s")


class ProgressBar(tqdm):
    """A tqdm that reports to the current task (captured when it is created) instead of drawing.

    Accepts every tqdm argument (and Hugging Face's ``name``); never writes to a terminal itself.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("name", None)
        kwargs["file"] = io.StringIO()
        kwargs["mininterval"] = 0.2
        if kwargs.get("disable") is None:
            kwargs["disable"] = False
        self._task = current_task() or Task(str(kwargs.get("desc") or "working"))
        super().__init__(*args, **kwargs)
        with self._task.lock:
            self._task.bars.append(self)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        if msg != "":  # "" is tqdm clearing the bar on close(leave=False)
            self._task.bar_moved(self)
        return True


def transformers_tqdm_hook(factory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """For ``transformers.utils.logging.set_tqdm_hook``: its bars (weight loading) report to the current
    task; when transformers has bars switched off, its own stand-in is kept."""
    if factory is not tqdm and not (isinstance(factory, type) and issubclass(factory, tqdm)):
        return factory(*args, **kwargs)
    return ProgressBar(*args, **kwargs)


class ProgressThrottle(logging.Filter):
    """Keep one progress record per task every ``interval_s`` (the first and every final one always)."""

    def __init__(self, interval_s: float) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != PROGRESS_LOGGER:
            return True
        name = str(getattr(record, "task", ""))
        if getattr(record, "final", False):
            self._last.pop(name, None)
            return True
        last = self._last.get(name)
        if last is not None and record.created - last < self.interval_s:
            return False
        self._last[name] = record.created
        return True
