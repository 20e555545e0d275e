"""Why the server could not start, in one line a person can act on: the setting, its value, what to do.

``explain(exc, setting, value)`` turns whatever a loader raised into a ``StartupError``: the Hub offline
or unreachable, a gated or unknown Hub id, a directory without the expected files, an out-of-memory
load or a device that is not there; ``listen_problem`` does the same for an address that cannot be
bound (PORT busy, HOST not of this machine). The classification looks at the exception and its causes by type
(Hugging Face Hub and httpx errors, ``MemoryError``, torch's out-of-memory errors) and, for torch's
CPU allocator, by its message; it never imports torch or huggingface_hub itself.

Nothing here logs: ``app.observability.startup`` logs the line at ERROR and the traceback at DEBUG.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

STARTUP_FAILED = 3  # exit status of a failed startup (uvicorn's own code for it)
INVALID_SETTINGS = 2  # exit status when a setting does not validate
_MAX_DETAIL = 240  # characters of an exception's message quoted in the line
DEMO_HINT = "`make demo` serves both model families offline, on tiny random checkpoints"
# the directory of `python -m app.tools.fixtures --out .fixtures` that `make demo` gives each model setting
DEMO_DIRS = {
    "TTS_MODEL": ".fixtures/lm",
    "CODEC_MODEL": ".fixtures/codec",
    "MOSS_TTS_MODEL": ".fixtures/moss_tts",
    "MOSS_CODEC_MODEL": ".fixtures/moss_codec",
}
_ALLOCATION_RE = re.compile(r"tried to allocate ([0-9.]+) ?([A-Za-z]*)", re.IGNORECASE)
_HUB = "https://huggingface.co"


class ModelSourceError(ValueError):
    """A model source (local directory or Hub id) is missing or lacks the files its family needs."""


@dataclass(eq=False)
class StartupError(Exception):
    """One startup failure: ``setting`` (an environment name, or "" when unknown) and its ``value``,
    the ``problem`` and the ``remedy``, each a short sentence without a final period."""

    setting: str
    value: str
    problem: str
    remedy: str
    exit_code: int = STARTUP_FAILED

    def __str__(self) -> str:
        subject = f"{self.setting}={self.value!r}: " if self.setting else ""
        return f"cannot start: {subject}{self.problem}. {self.remedy}."


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception it was raised from or while handling, outermost first."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _names(exc: BaseException) -> set[str]:
    """Class names along the MRO of every exception in the chain (no import of the defining library)."""
    return {cls.__name__ for cause in causes(exc) for cls in type(cause).__mro__}


def _detail(exc: BaseException) -> str:
    """The first line of the exception's message, shortened."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 3] + "..."


def is_out_of_memory(exc: BaseException) -> bool:
    """True for ``MemoryError``, torch's ``OutOfMemoryError`` (cuda, npu) and the CPU allocator's failure."""
    names = _names(exc)
    if names & {"MemoryError", "OutOfMemoryError"}:
        return True
    messages = [str(cause).lower() for cause in causes(exc)]
    return any("can't allocate memory" in text or "out of memory" in text for text in messages)


def allocation(exc: BaseException) -> str:
    """`` (it tried to allocate 12.3 GB)`` from an allocator's message, or "" when it says no size."""
    for cause in causes(exc):
        found = _ALLOCATION_RE.search(str(cause))
        if found:
            amount, unit = float(found.group(1)), found.group(2)
            if unit.lower() == "bytes":
                amount, unit = amount / 1e9, "GB"
            return f" (it tried to allocate {amount:.1f} {unit})"
    return ""


def demo_hint(setting: str) -> str:
    """Where the demo's checkpoint for ``setting`` is, after ``DEMO_HINT``."""
    directory = DEMO_DIRS.get(setting)
    if directory is None:
        return DEMO_HINT
    return f"{DEMO_HINT} ({setting}={directory}, written by `python -m app.tools.fixtures --out .fixtures`)"


def _hub_problem(exc: BaseException, setting: str, value: str) -> StartupError | None:
    """The Hugging Face Hub failures: gated, unknown id, offline, unreachable; None for anything else."""
    names = _names(exc)
    endpoint = os.environ.get("HF_ENDPOINT", _HUB)
    local = f"set {setting} to a local directory with the model's files; {demo_hint(setting)}"
    if "GatedRepoError" in names:
        return StartupError(
            setting,
            value,
            "the model is gated on the Hugging Face Hub",
            f"Accept its terms at {endpoint}/{value} and log in (`hf auth login` or HF_TOKEN), or {local}",
        )
    if names & {"RepositoryNotFoundError", "RevisionNotFoundError"}:
        return StartupError(
            setting,
            value,
            "no such model on the Hugging Face Hub (misspelled, or private)",
            f"Check the id (owner/name); for a private model log in (`hf auth login` or HF_TOKEN); "
            f"or {local}",
        )
    if "OfflineModeIsEnabled" in names:
        return StartupError(
            setting,
            value,
            "not in the local Hugging Face cache, and downloads are off (HF_HUB_OFFLINE)",
            f"Unset HF_HUB_OFFLINE to download it, or {local}",
        )
    unreachable = {"LocalEntryNotFoundError", "ConnectError", "ConnectTimeout", "TimeoutException"}
    if names & unreachable or "ConnectionError" in names:
        return StartupError(
            setting,
            value,
            f"the Hugging Face Hub ({endpoint}) cannot be reached and the model is not in the local cache",
            f"Check the network (proxy, HF_ENDPOINT) and retry, or {local}",
        )
    if "HfHubHTTPError" in names:
        refused = f"the Hugging Face Hub refused the download: {_detail(exc)}"
        return StartupError(setting, value, refused, f"Retry later, or {local}")
    return None


def _device_problem(exc: BaseException, value: str) -> StartupError:
    """A device that is not there (``DEVICE``): no CUDA, no torch_npu, no NPU, an unknown name."""
    if "torch_npu" in str(exc):
        remedy = "Install torch_npu and the CANN toolkit (requirements-npu.txt), or set DEVICE=cpu"
    else:
        remedy = "Set DEVICE=cpu, or leave DEVICE empty to use CUDA when present and the CPU otherwise"
    return StartupError("DEVICE", value, _detail(exc), remedy)


def explain(exc: BaseException, setting: str = "", value: str = "") -> StartupError:
    """The ``StartupError`` for ``exc``, raised while starting what ``setting`` (= ``value``) names.

    ``setting`` "DEVICE" marks device resolution; any other setting names a model source (a Hub id or a
    directory). An exception that is already a ``StartupError`` is returned as it is.
    """
    if isinstance(exc, StartupError):
        return exc
    if is_out_of_memory(exc):
        return StartupError(
            setting,
            value,
            "out of memory while loading" + allocation(exc),
            "Free memory, use a smaller dtype (CODEC_DTYPE, LM_DTYPE = bfloat16) or another DEVICE "
            "(DEVICE=cpu uses system memory)",
        )
    if setting == "DEVICE":
        return _device_problem(exc, value)
    if setting:
        hub = _hub_problem(exc, setting, value)
        if hub is not None:
            return hub
        if any(isinstance(cause, ModelSourceError) for cause in causes(exc)):
            return StartupError(
                setting,
                value,
                _detail(exc),
                f"Point {setting} at a directory in the model's official layout; {demo_hint(setting)}",
            )
    return StartupError(
        setting,
        value,
        f"{type(exc).__name__}: {_detail(exc)}",
        "LOG_LEVEL=debug prints the traceback",
    )


def listen_problem(exc: OSError, host: str, port: int) -> StartupError:
    """Why the server cannot listen on ``host``:``port``, naming the setting to change (PORT or HOST)."""
    where = f"cannot listen on {host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return StartupError(
            "PORT",
            str(port),
            f"{where}: another process already listens there",
            f"Stop it (`ss -ltnp 'sport = :{port}'` names it) or set PORT to a free port",
        )
    if exc.errno == errno.EACCES:
        remedy = "Set PORT to 1024 or above (the ports below need root)"
        return StartupError("PORT", str(port), f"{where}: permission denied", remedy)
    return StartupError(
        "HOST",
        host,
        f"{where}: {exc.strerror or _detail(exc)}",
        "Set HOST to an address of this machine (0.0.0.0 for every interface, 127.0.0.1 for this one only)",
    )


def settings_problems(errors: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per invalid setting from pydantic's ``ValidationError.errors()``."""
    lines = []
    for error in errors:
        loc = error.get("loc", ())
        parts = loc if isinstance(loc, tuple | list) else ()
        location = ".".join(str(part) for part in parts if part != "__root__")
        subject = f"{location}={error.get('input')!r}: " if location else ""
        lines.append(f"invalid setting: {subject}{error.get('msg')}")
    return lines
