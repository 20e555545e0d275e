"""An address the server cannot listen on fails at once, before any model loads, with one line that names
the setting to change: PORT when another process listens there (or the port needs root), HOST when the
address is not of this machine."""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.observability.startup import check_listen
from app.observability.startup_errors import StartupError, listen_problem
from tests.observability.test_first_run import assert_one_line_failure, run_server, server_env


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port on 127.0.0.1 that another socket listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def test_a_busy_port_names_port(busy_port: int) -> None:
    with pytest.raises(StartupError) as caught:
        check_listen("127.0.0.1", busy_port)
    assert caught.value.setting == "PORT" and caught.value.value == str(busy_port)
    assert f"cannot start: PORT='{busy_port}': cannot listen on 127.0.0.1:{busy_port}" in str(caught.value)
    assert "another process already listens there" in str(caught.value)


def test_a_free_port_passes_and_stays_free() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    check_listen("127.0.0.1", port)
    with socket.socket() as again:  # nothing kept it: uvicorn binds it next
        again.bind(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("code", "setting", "words"),
    [
        (errno.EACCES, "PORT", "permission denied"),
        (errno.EADDRNOTAVAIL, "HOST", "Set HOST to an address of this machine"),
    ],
)
def test_other_bind_failures_name_their_setting(code: int, setting: str, words: str) -> None:
    failure = listen_problem(OSError(code, "the system's words"), "10.9.8.7", 80)
    assert failure.setting == setting and words in str(failure)


@pytest.mark.slow
async def test_the_server_fails_at_once_on_a_busy_port(
    busy_port: int, tiny_codec_dir: Path, tmp_path: Path
) -> None:
    env = server_env(tmp_path, CODEC_MODEL=str(tiny_codec_dir), PORT=str(busy_port))
    started = time.monotonic()
    result = await run_server(env, tmp_path, timeout_s=60)
    took = time.monotonic() - started
    assert_one_line_failure(result, f"PORT='{busy_port}'", "another process already listens there")
    assert not any(r["logger"].startswith(("app.synthesis", "app.families")) for r in result.records)
    assert took < 30  # the time to import the app: no model was loaded
