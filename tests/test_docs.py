"""The documentation's links lead somewhere: every relative link in the README, CONTRIBUTING.md
and ``docs/*.md`` names a file that exists and, after ``#``, a heading that file has.

A reader who follows a link from the front door into the manual, or from one page to a section
of another, must land on it; moving a section or renaming a heading breaks links silently
otherwise. Anchors are computed the way GitHub renders them (lowercase, punctuation dropped,
spaces to hyphens, ``-1``, ``-2`` … for repeats).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")])

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_CODE = re.compile(r"`+[^`]*`+")
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
_CITATION = re.compile(r"\b(docs/[\w-]+\.md)(?:#([\w-]+))?")
_SECTION_CITATION = re.compile(r"\b([\w-]+\.md) §")
_SOURCE_PATH = re.compile(r"`((?:app|tests|bench|tools|packaging|resources)/[^`\s]+)`")


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks (a ``# comment`` in a shell block is no heading)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced and not line.startswith("    "):
            lines.append(line)
    return lines


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: Counter[str] = Counter()
    found = set()
    for line in _prose_lines(page.read_text(encoding="utf-8")):
        if match := _HEADING.match(line):
            anchor = github_anchor(match.group(2))
            found.add(f"{anchor}-{seen[anchor]}" if seen[anchor] else anchor)
            seen[anchor] += 1
    return found


def relative_links(page: Path) -> list[str]:
    links = []
    for line in _prose_lines(page.read_text(encoding="utf-8")):
        for target in _LINK.findall(_INLINE_CODE.sub("", line)):
            if not _EXTERNAL.match(target):
                links.append(target)
    return links


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """Each relative link of ``page`` whose file or heading is missing, with the reason."""
    problems = []
    for link in relative_links(page):
        path_part, _, anchor = link.partition("#")
        target = (page.parent / path_part).resolve() if path_part else page
        shown = (
            target.relative_to(root.resolve()) if target.is_relative_to(root.resolve()) else target
        )
        if not target.exists():
            problems.append(f"{link}: no file {shown}")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            problems.append(f"{link}: {shown} has no heading #{anchor}")
    return problems


def missing_source_paths(page: Path, root: Path = ROOT) -> list[str]:
    """Source paths the page names in backticks (``app/…``, ``tests/…``) that do not exist."""
    named = {
        match.group(1)
        for line in _prose_lines(page.read_text(encoding="utf-8"))
        for match in _SOURCE_PATH.finditer(line)
        if not any(mark in match.group(1) for mark in "*<{")
    }
    return sorted(path for path in named if not (root / path).exists())


def broken_citations(source: Path, root: Path = ROOT) -> list[str]:
    """Citations of the docs in a source file (``docs/architecture.md#statistics``) whose page or
    heading is missing, and citations by section sign (``runtime.md §2``) of a page the
    repository does not have."""
    problems = []
    text = source.read_text(encoding="utf-8")
    for page, anchor in _CITATION.findall(text):
        target = root / page
        if not target.exists():
            problems.append(f"{page}: no such page")
        elif anchor and anchor not in anchors(target):
            problems.append(f"{page}#{anchor}: no such heading")
    for page in _SECTION_CITATION.findall(text):
        if not any(root.rglob(page)):
            problems.append(f"{page} §: not in the repository; cite the docs/ page that holds it")
    return problems


def test_every_citation_of_the_docs_in_the_code_resolves() -> None:
    sources = [
        path
        for folder in ("app", "tests", "bench", "tools", "packaging")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != Path(__file__).resolve()
    ]
    problems = {
        str(path.relative_to(ROOT)): found for path in sources if (found := broken_citations(path))
    }
    assert problems == {}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_heading(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_source_path_the_page_names_exists(page: Path) -> None:
    assert missing_source_paths(page) == [], "moved or renamed: update the page"


def test_the_manual_exists_and_the_readme_links_every_page() -> None:
    manual = {page.name for page in (ROOT / "docs").glob("*.md")}
    assert {"user-guide.md", "cli.md", "server-api.md", "benchmarks.md", "install.md"} <= manual
    assert {"architecture.md"} <= manual
    linked = {Path(link.partition("#")[0]).name for link in relative_links(ROOT / "README.md")}
    assert manual - linked == set(), "pages of docs/ the README does not link"


def test_the_readme_shows_the_command_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert ci in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()


def test_the_checker_sees_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "cli.md").write_text("# Command line\n\n## Catalog\n", encoding="utf-8")
    page = tmp_path / "docs" / "probe.md"
    page.write_text(
        "# Probe\n\n[fine](#probe) [also fine](cli.md#catalog) [gone](nowhere.md)\n"
        "[no heading](cli.md#no-such-heading) `[in code](nowhere.md)`\n"
        "```\n[in a block](nowhere.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page, tmp_path) == [
        "nowhere.md: no file docs/nowhere.md",
        "cli.md#no-such-heading: docs/cli.md has no heading #no-such-heading",
    ]


def test_the_path_check_sees_a_moved_module(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "here.py").write_text("", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "`app/here.py` and `app/gone.py`, `tests/<area>` and `bench/*.sh` are patterns\n"
        "```\n`app/in_a_block.py`\n```\n",
        encoding="utf-8",
    )
    assert missing_source_paths(page, tmp_path) == ["app/gone.py"]


def test_anchors_follow_githubs_rules() -> None:
    assert github_anchor("Graft a sidecar's MTP head into a GGUF") == (
        "graft-a-sidecars-mtp-head-into-a-gguf"
    )
    assert github_anchor("A separate MTP head file (`mtp-*.gguf`)") == (
        "a-separate-mtp-head-file-mtp-gguf"
    )
    assert github_anchor("llama.cpp builds") == "llamacpp-builds"


def test_the_citation_check_sees_a_bad_heading_and_a_page_outside_the_repo(
    tmp_path: Path,
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "architecture.md").write_text("# Architecture\n## Statistics\n")
    source = tmp_path / "module.py"
    source.write_text(
        '"""Defined in docs/architecture.md#statistics, not docs/architecture.md#stats, nor in\n'
        'docs/gone.md or runtime.md §2."""\n',
        encoding="utf-8",
    )
    assert broken_citations(source, tmp_path) == [
        "docs/architecture.md#stats: no such heading",
        "docs/gone.md: no such page",
        "runtime.md §: not in the repository; cite the docs/ page that holds it",
    ]
