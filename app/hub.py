"""Model sources: a local directory, or a Hugging Face Hub id downloaded (with progress) into the cache.

Every model family resolves its ``*_MODEL`` setting here, so each gets the same behaviour: a path that
exists is used as it is and checked for the files the family needs (``ModelSourceError`` naming the
missing ones); an ``owner/name`` that is not a directory is fetched with
``huggingface_hub.snapshot_download`` (only the files matching ``patterns``; the cache and
``HF_HUB_OFFLINE`` / ``HF_ENDPOINT`` / ``HF_TOKEN`` apply), reporting bytes and percentage to a
progress task. The Hub's own errors pass through unchanged for ``startup_errors.explain``.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from pathlib import Path

from app.observability.progress import ProgressBar, task
from app.observability.startup_errors import ModelSourceError

REPO_ID_RE = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # matched whole (fullmatch)


def missing_files(directory: Path, required: Sequence[Sequence[str]]) -> list[str]:
    """The entries of ``required`` with no match in ``directory``; each entry lists alternatives
    (glob patterns), one of which must be present: ``[["config.json"], ["*.safetensors"]]``."""
    names = [path.name for path in directory.iterdir()]
    return [
        " or ".join(options)
        for options in required
        if not any(fnmatch.filter(names, pattern) for pattern in options)
    ]


def check_directory(directory: Path, required: Sequence[Sequence[str]]) -> Path:
    """``directory`` when it holds every ``required`` file, else ``ModelSourceError`` naming the gaps."""
    missing = missing_files(directory, required)
    if missing:
        raise ModelSourceError(f"the directory {directory} has no {', no '.join(missing)}")
    return directory


def download(repo_id: str, patterns: Sequence[str], revision: str | None = None) -> Path:
    """The cached snapshot of ``repo_id`` (files matching ``patterns``; ``revision`` a branch, tag or
    commit, None = the default branch), downloaded when missing; the bytes and percentage go to a progress
    task "downloading <repo_id>". Blocking: run in a thread."""
    import huggingface_hub

    with task(f"downloading {repo_id}") as work:
        path = huggingface_hub.snapshot_download(
            repo_id=repo_id, allow_patterns=list(patterns), tqdm_class=ProgressBar, revision=revision
        )
        if work.moved():  # something was downloaded (a cached snapshot counts nothing)
            work.done(f"done in {work.elapsed():.1f} s")
    return Path(path)


def resolve(
    source: str,
    patterns: Sequence[str],
    required: Sequence[Sequence[str]] = (),
    revision: str | None = None,
) -> Path:
    """The local directory of ``source``: itself when it is a directory (checked for ``required``), else
    the Hub snapshot of an ``owner/name`` id at ``revision`` (also checked). ``ModelSourceError`` when it
    is neither."""
    path = Path(source).expanduser()
    if path.is_dir():
        return check_directory(path, required)
    if path.exists():
        raise ModelSourceError(f"{source} is a file; pass the directory that holds the model's files")
    if not REPO_ID_RE.fullmatch(source):
        raise ModelSourceError(f"{source} is neither a directory nor a Hugging Face id (owner/name)")
    return check_directory(download(source, patterns, revision), required)
