"""The docs hold together: every relative link in README.md and docs/ reaches a file, and its
anchor a heading of that file; every docs/ page a code comment cites exists."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# [text](target) and ![alt](target); the text may hold one level of brackets ("local[4]").
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")
CITED_DOC = re.compile(r"\bdocs/[A-Za-z0-9_./-]+\.md\b")
# Code and build files; the docs' own links are the test below's (npu.md cites vendors'
# docs/).
SOURCE_SUFFIXES = {
    ".java",
    ".scala",
    ".py",
    ".sh",
    ".cc",
    ".h",
    ".c",
    ".xml",
    ".toml",
    ".properties",
}
SKIPPED_DIRS = {".git", "target", "venv", ".venv", "node_modules", "__pycache__"}


def pages() -> list[Path]:
    return [
        ROOT / "README.md",
        ROOT / "python" / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
    ]


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans (links there are examples)."""
    outside: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            outside.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(outside)


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        match = re.match(r"^#{1,6} (.*)$", line)
        if fenced or not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> Iterator[tuple[str, str]]:
    """(link as written, target) for every relative link of the page."""
    for match in LINK.finditer(prose(page.read_text(encoding="utf-8"))):
        target = match.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # http:, https:, mailto:
        yield match.group(0), target


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_a_heading(page: Path) -> None:
    broken: list[str] = []
    for written, target in links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{written}: no file {resolved.relative_to(ROOT)}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{written}: no heading #{anchor} in {resolved.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)


def test_every_docs_page_a_source_file_cites_exists() -> None:
    missing: list[str] = []
    for directory, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        for name in files:
            source = Path(directory) / name
            if source.suffix not in SOURCE_SUFFIXES:
                continue
            text = source.read_text(encoding="utf-8", errors="replace")
            for cited in sorted(set(CITED_DOC.findall(text))):
                if not (ROOT / cited).exists():
                    missing.append(f"{source.relative_to(ROOT)}: {cited}")
    assert not missing, "cited docs pages that do not exist:\n" + "\n".join(missing)


def test_the_anchor_rule_matches_githubs() -> None:
    assert (
        slug("Result: 2 ranks across executor JVMs (`local-cluster[2,1,3072]`)")
        == "result-2-ranks-across-executor-jvms-local-cluster213072"
    )
    assert (
        slug("First run on a new cluster: `bin/allgather-perf`")
        == "first-run-on-a-new-cluster-binallgather-perf"
    )
    assert (
        slug("Across hosts: hierarchical all-gather (`tcp-hier`)")
        == "across-hosts-hierarchical-all-gather-tcp-hier"
    )
