"""The documentation's shape: README.md stays short, every page has a home in docs/index.md, every block
has a language and a valid marker, samples parse, links resolve, and the text speaks of the product."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
import yaml

from tests.docs.blocks import MARKER, PYTHON, ROOT, SAMPLES, SHELL, all_blocks, documents, parser

README_MAX_BYTES = 20_000
REPO_PATH = re.compile(r"^(app|bench|tests|deploy|examples|docs)/[\w./-]*$")
PLACEHOLDER = r"[*<>{}]|\.\.\.|(^|/)(NAME|DIR|FILE)\b|^bench/results/tmp/"
# Words about how the project was made rather than about the product: issue and pull-request numbers,
# work sessions, commands behind one machine's lock file, that machine's paths.
NOT_PRODUCT = re.compile(
    r"\bissues? #?\d+|(?<![\w/&])#\d+\b|\b(this|development) session\b|\bflock\s+/|heavy\.lock|"
    r"/work/|\bthe lead\b",
    re.IGNORECASE,
)


def test_readme_is_short() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/"


def test_every_page_is_linked_from_the_index() -> None:
    index = ROOT / "docs" / "index.md"
    linked = {(index.parent / target).resolve() for target, _ in links(index)}
    pages = {path.resolve() for path in documents()[1:] if path != index}
    assert pages - linked == set(), "pages docs/index.md does not link"


def test_every_block_has_a_known_language() -> None:
    known = SHELL | PYTHON | SAMPLES
    unknown = [f"{b.where} ({b.language or 'none'})" for b in all_blocks() if b.language not in known]
    assert not unknown, f"fences need one of {sorted(known)}: {unknown}"


def test_markers_sit_right_above_a_fence() -> None:
    orphans = []
    for path in documents():
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            following = lines[number + 1].lstrip() if number + 1 < len(lines) else ""
            if MARKER.match(line) and not following.startswith(("```", "~~~")):
                orphans.append(f"{path.relative_to(ROOT)}:{number + 1}")
    assert not orphans, f"markers not on the line above a fence: {orphans}"
    all_blocks()  # raises on an unknown word in a marker


def test_markers_fit_their_blocks() -> None:
    for block in all_blocks():
        if block.needs or block.starts:
            assert block.language in SHELL | PYTHON, f"{block.where}: a marker on a {block.language} block"
        if block.starts:
            assert block.language in SHELL, f"{block.where}: a server is started from a shell block"


@pytest.mark.parametrize("language", ["json", "yaml"])
def test_samples_parse(language: str) -> None:
    for block in all_blocks():
        if block.language == language:
            try:
                json.loads(block.text) if language == "json" else list(yaml.safe_load_all(block.text))
            except (ValueError, yaml.YAMLError) as exc:
                pytest.fail(f"{block.where}: not {language}: {exc}")


def test_the_text_speaks_of_the_product() -> None:
    found = []
    for path in documents():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            where = f"{path.relative_to(ROOT)}:{number}"
            found += [f"{where}: {match.group(0)!r}" for match in NOT_PRODUCT.finditer(line)]
    assert not found, "\n".join(found)


def test_relative_links_resolve() -> None:
    broken = []
    for path in documents():
        for target, fragment in links(path):
            file = (path.parent / target).resolve() if target else path
            if not file.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target} does not exist")
            elif fragment and file.suffix == ".md" and fragment not in anchors(file):
                broken.append(f"{path.relative_to(ROOT)}: no heading #{fragment} in {file.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


def test_named_paths_exist() -> None:
    """A file or folder of the checkout named in backticks exists (moving one means updating its docs);
    patterns, placeholders and what the docs' own commands write are not paths to check."""
    missing = []
    for path in documents():
        for token in parser().parse(path.read_text(encoding="utf-8")):
            for child in token.children or []:
                named = child.content.strip() if child.type == "code_inline" else ""
                checked = REPO_PATH.match(named) and not re.search(PLACEHOLDER, named)
                if checked and not (ROOT / named).exists():
                    missing.append(f"{path.relative_to(ROOT)}: {named}")
    assert not missing, "\n".join(missing)


def links(path: Path) -> list[tuple[str, str]]:
    """The relative links of ``path`` as (target, fragment); a same-page anchor has an empty target."""
    found = []
    for token in parser().parse(path.read_text(encoding="utf-8")):
        for child in token.children or []:
            href = str(child.attrGet("href") or child.attrGet("src") or "")
            if href and not re.match(r"^[a-z][a-z0-9+.-]*:", href, flags=re.IGNORECASE):
                target, _, fragment = href.partition("#")
                found.append((target, fragment))
    return found


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``path``: lower case, punctuation dropped, spaces as
    hyphens, and ``-1``, ``-2``... on repeats."""
    tokens = parser().parse(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set()
    for opening, inline in itertools.pairwise(tokens):
        if opening.type != "heading_open":
            continue
        words = [child for child in inline.children or [] if child.type in {"text", "code_inline"}]
        text = "".join(child.content for child in words)
        slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found
