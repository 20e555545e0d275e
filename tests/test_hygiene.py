"""The repository holds only the product: no link out of the tree, no virtualenv, cache or fixture
directory is tracked (a fresh clone on any machine must set itself up)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[1]
MACHINE_DIRS = {
    ".venv", "venv", "env", "site-packages", "node_modules", "__pycache__", ".pytest_cache",
    ".mypy_cache", ".ruff_cache", ".import_linter_cache", ".fixtures", ".cache", ".ipynb_checkpoints",
}  # fmt: skip
MACHINE_FILES = {"pyvenv.cfg", ".env", ".DS_Store"}
"""Names that are a machine's state, never the product's (``.env_example`` is the product's)."""


def tracked(root: Path) -> list[tuple[str, str]]:
    """Every tracked path of the git checkout at ``root`` with its mode (``120000``: a symlink)."""
    out = subprocess.run(
        ["git", "ls-files", "-s", "-z"], cwd=root, capture_output=True, check=True
    ).stdout.decode()
    entries = []
    for entry in filter(None, out.split("\0")):
        meta, path = entry.split("\t", 1)
        entries.append((meta.split()[0], path))
    return entries


def problems(root: Path) -> list[str]:
    """What the checkout at ``root`` tracks that it must not."""
    found = []
    for mode, path in tracked(root):
        parts = PurePosixPath(path).parts
        if any(part in MACHINE_DIRS for part in parts[:-1]) or parts[-1] in MACHINE_DIRS | MACHINE_FILES:
            found.append(f"{path}: a virtualenv, cache, fixture or machine file")
        if mode == "120000":
            target = os.readlink(root / path) if (root / path).is_symlink() else ""
            resolved = (root / path).parent.joinpath(target).resolve()
            if not target or os.path.isabs(target) or not resolved.is_relative_to(root.resolve()):
                found.append(f"{path}: a link leaving the tree ({target or 'unreadable'})")
    return found


def test_the_checkout_tracks_only_the_product() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an unpacked source archive)")
    assert problems(ROOT) == []


def test_a_link_out_of_the_tree_or_a_venv_is_caught(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "app.py").write_text("print('hi')\n")
    (repo / ".venv").symlink_to(tmp_path / "elsewhere")
    (repo / "docs").mkdir()
    (repo / "docs" / "index.md").symlink_to("../app.py")  # a link inside the tree is fine
    (repo / "tools" / "__pycache__").mkdir(parents=True)
    (repo / "tools" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    subprocess.run([*git, "add", "-f", "."], cwd=repo, check=True)
    assert sorted(problems(repo)) == [
        ".venv: a link leaving the tree (" + str(tmp_path / "elsewhere") + ")",
        ".venv: a virtualenv, cache, fixture or machine file",
        "tools/__pycache__/x.pyc: a virtualenv, cache, fixture or machine file",
    ]
