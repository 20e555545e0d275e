"""Where benchmarks keep their measured runs: ``bench/results/<name>.json``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def save_report(report: object, out: str) -> Path:
    """Write ``report`` as indented JSON to ``bench/results/`` under the file name of ``out``; say where
    on stderr."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / Path(out).name
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
    return path
