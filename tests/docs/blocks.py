"""The documentation's code blocks, as the doc tests see them.

Every fenced block of README.md and docs/**/*.md carries a language. Shell (``bash``, ``sh``) and
``python`` blocks are commands a reader runs: the doc test runs each one against the demo server unless
the line right above its fence is a marker:

- ``<!-- needs: gpu, docker -->``: it needs what the words in :data:`NEEDS` name, which the test machine
  does not have, so it is not run (the marker says why, on the block).
- ``<!-- starts: server -->``: it starts a server that runs until stopped (``make demo``). The test runs
  it with ``PORT`` set to a free port, waits for ``/ready`` to answer 200 there, then stops it.

The other languages (:data:`SAMPLES`) are output samples and files (a log excerpt, a JSON answer, a YAML
manifest): never run; JSON and YAML ones must parse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
SHELL = frozenset({"bash", "sh"})
PYTHON = frozenset({"python"})
SAMPLES = frozenset({"text", "json", "yaml"})
NEEDS = {
    "model-download": "the real checkpoints from the Hugging Face Hub (network, gigabytes)",
    "gpu": "an NVIDIA GPU",
    "npu": "an Ascend NPU with its driver and CANN",
    "docker": "a Docker engine",
    "kubernetes": "a Kubernetes cluster",
    "vllm": "vLLM installed (a GPU host)",
    "livekit-server": "a LiveKit server and its credentials",
    "full-size": "full-size random checkpoints: gigabytes of memory and minutes of CPU",
    "minutes": "runs for minutes (a whole benchmark)",
    "whole-suite": "runs the test suite, this test included",
    "browser": "a web UI to open in a browser (tests/ui covers it)",
}
STARTS = frozenset({"server"})
MARKER = re.compile(r"^\s*<!--\s*(needs|starts):\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language and text, and its marker (if any)."""

    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    needs: tuple[str, ...] = ()
    starts: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def runnable(self) -> bool:
        """A shell or Python block with no ``needs`` marker (a ``starts`` block is run too)."""
        return self.language in SHELL | PYTHON and not self.needs


def documents() -> list[Path]:
    """README.md and every Markdown file under docs/, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of ``path`` with the marker on the line above each (raises on a bad marker)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for token in parser().parse("\n".join(lines)):
        if token.type != "fence" or token.map is None:
            continue
        start = token.map[0]
        language = token.info.split()[0] if token.info.strip() else ""
        needs: tuple[str, ...] = ()
        starts = None
        marker = MARKER.match(lines[start - 1]) if start > 0 else None
        if marker:
            kind, words = marker.group(1), [w.strip() for w in marker.group(2).split(",") if w.strip()]
            where = f"{path.relative_to(ROOT)}:{start}"
            if kind == "needs":
                unknown = [w for w in words if w not in NEEDS]
                if not words or unknown:
                    raise ValueError(f"{where}: unknown needs {unknown or words}; known: {sorted(NEEDS)}")
                needs = tuple(words)
            else:
                if len(words) != 1 or words[0] not in STARTS:
                    raise ValueError(f"{where}: unknown starts {words}; known: {sorted(STARTS)}")
                starts = words[0]
        found.append(Block(path, start + 1, language, token.content, needs, starts))
    return found


def all_blocks() -> list[Block]:
    return [block for path in documents() for block in blocks(path)]
