"""The tool's output: a JSON document and plain-text tables of one reference and its comparisons."""

from __future__ import annotations

from typing import Any

from app.tools.precision.compare import Comparison, Thresholds, finite
from app.tools.precision.runs import Run


def _clean(data: dict[str, Any]) -> dict[str, Any]:
    return {k: ([finite(x) for x in v] if isinstance(v, list) else finite(v)) for k, v in data.items()}


def _run_info(run: Run) -> dict[str, Any]:
    return {"config": run.config.spec(), "label": run.config.label, "environment": run.environment}


def to_json(reference: Run, comparisons: list[Comparison], limits: Thresholds) -> dict[str, Any]:
    """Everything measured, JSON-ready (non-finite numbers as strings)."""
    items = []
    for comparison in comparisons:
        item: dict[str, Any] = _run_info(comparison.test)
        item["passed"] = comparison.passed
        item["failures"] = comparison.failures
        item["tensors"] = [{"name": n} | _clean(a.as_dict()) for n, a in comparison.tensors.items()]
        if comparison.codes:
            item["codes"] = [{"name": n} | a.as_dict() for n, a in comparison.codes.items()]
        if comparison.next_token is not None:
            item["next_token"] = _clean(comparison.next_token.as_dict())
        if comparison.audio is not None:
            item["audio"] = _clean(comparison.audio.as_dict())
        items.append(item)
    return {
        "part": reference.part,
        "source": reference.source,
        "options": reference.options,
        "reference": _run_info(reference),
        "thresholds": limits.as_dict(),
        "comparisons": items,
        "passed": all(c.passed for c in comparisons),
    }


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(
        cell.ljust(w) if i == 0 else cell.rjust(w)
        for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
    )


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [_row(header, widths), _row(["-" * w for w in widths], widths), *(_row(r, widths) for r in rows)]


def _pct(value: float) -> str:
    return f"{100 * value:.3f}%"


def to_text(reference: Run, comparisons: list[Comparison]) -> str:
    """Tables: per comparison every tensor's agreement, the codes' agreement, then the next-token or audio
    checks and the verdict;
    with several comparisons, a side-by-side table of relative L2 error per tensor."""
    lines = [f"{reference.part}  source {reference.source}  reference {reference.config.label}"]
    for c in comparisons:
        lines += ["", f"{c.test.config.label} vs {reference.config.label}"]
        rows = [
            [
                n,
                "x".join(map(str, a.shape)),
                f"{a.cosine:.6f}",
                _pct(a.rel_l2),
                f"{a.max_abs:.4g}",
                f"{a.mean_abs:.4g}",
                f"{a.snr_db:.1f}",
            ]
            for n, a in c.tensors.items()
        ]
        lines += _table(["tensor", "shape", "cosine", "rel L2", "max abs", "mean abs", "SNR dB"], rows)
        for name, codes in c.codes.items():
            shares = " ".join(f"{100 * v:.0f}" for v in codes.per_codebook)
            lines.append(
                f"{name}: {codes.frames} frames x {codes.codebooks} codebooks, identical codes "
                f"{_pct(codes.mean)} (per codebook, %: {shares}), frames identical in every codebook "
                f"{_pct(codes.all_codebooks)}"
            )
        t = c.next_token
        if t is not None:
            lines.append(
                f"next token over {t.positions} positions: top-1 {_pct(t.top1_agreement)}, "
                f"top-{t.topk} overlap {_pct(t.topk_overlap)}, "
                f"KL mean {t.kl_mean:.3g} max {t.kl_max:.3g} nats, "
                f"TV mean {t.tv_mean:.3g}, positions with TV > {t.tv_threshold}: {_pct(t.share_tv_above)}"
            )
        if c.audio is not None:
            lines.append(f"audio: SNR {c.audio.snr_db:.2f} dB, log-mel distance {c.audio.log_mel_db:.4f} dB")
        lines.append("PASS" if c.passed else "FAIL: " + "; ".join(c.failures))
    if len(comparisons) > 1:
        lines += ["", f"relative L2 error against {reference.config.label}"]
        names = list(comparisons[0].tensors)
        rows = [[n, *(_pct(c.tensors[n].rel_l2) for c in comparisons)] for n in names]
        lines += _table(["tensor", *(c.test.config.label for c in comparisons)], rows)
    return "\n".join(lines)
