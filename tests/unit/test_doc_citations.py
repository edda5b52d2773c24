"""Citations of design documents in the repository resolve.

The code cites its design documents as ``docs/<page>.md "Section"`` (several sections as
``"A" and "B"``); each must name a page under ``docs/`` and a heading on it. The team's notes
outside the repository are not cited any more: a fresh clone holds everything a citation names.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()  # its examples are not citations
ROOT = HERE.parents[2]
SKIP_DIRS = frozenset({".git", ".venv", "site", "build", "node_modules", "__pycache__"})
TEXT_SUFFIXES = frozenset({".py", ".pyi", ".md", ".toml", ".yml", ".yaml", ".txt", ".proto", ""})
NOTES = ("DESIGN", "SPECS")  # the notes' names, kept apart so this file does not cite them
OUTSIDE = re.compile(rf"\b(?:{'|'.join(NOTES)})(?:\.md\b|\s+(?:rule\b|\"))")
QUOTED = r'"([^"]+)"'
CITATION = re.compile(
    rf"\b(docs/[\w./-]+\.md|README)\s+{QUOTED}((?:(?:\s*,|\s+and|\s+or)\s+{QUOTED})*)"
)


def repository_files() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if any(p in SKIP_DIRS or p.endswith(".egg-info") for p in parts) or not path.is_file():
            continue
        if path.suffix in TEXT_SUFFIXES and not path.name.startswith(".") and path != HERE:
            found.append(path)
    return found


def headings(page: Path) -> set[str]:
    """The headings of a Markdown page, without their ``#`` marks."""
    out = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            out.add(line.lstrip("#").strip())
    return out


def citations(text: str) -> list[tuple[str, str]]:
    """(page, section) of every ``docs/page.md "Section"`` or ``README "Section"`` in ``text``."""
    flat = " ".join(line.strip().lstrip("#").strip() for line in text.splitlines())
    out = []
    for match in CITATION.finditer(flat):
        page = match.group(1)
        out.append((page, match.group(2)))
        out.extend((page, more) for more in re.findall(QUOTED, match.group(3)))
    return out


FILES = repository_files()


def test_nothing_cites_the_notes_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {m.group(0)!r}"
        for path in FILES
        for m in OUTSIDE.finditer(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not found, 'cite docs/<page>.md "Section" instead:\n' + "\n".join(found)


def test_every_citation_names_a_page_and_a_heading_on_it() -> None:
    missing = []
    cited = 0
    for path in FILES:
        for page, section in citations(path.read_text(encoding="utf-8", errors="replace")):
            cited += 1
            target = ROOT / ("README.md" if page == "README" else page)
            if not target.is_file():
                missing.append(f"{path.relative_to(ROOT)}: {page} does not exist")
            elif " ".join(section.split()) not in headings(target):
                missing.append(f"{path.relative_to(ROOT)}: {page} has no heading {section!r}")
    assert not missing, "\n".join(missing)
    assert cited >= 22  # the design citations of the code, at least


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('see docs/design.md "Receipts" and "Decision\n    record (v1)".', [
            ("docs/design.md", "Receipts"), ("docs/design.md", "Decision record (v1)")]),
        ('# (docs/operating.md\n# "Faults, rollbacks and restore")', [
            ("docs/operating.md", "Faults, rollbacks and restore")]),
        ('README "Walk-through"', [("README", "Walk-through")]),
        ("docs/design.md alone", []),
    ],
)  # fmt: skip
def test_citations_are_read_across_lines(text: str, expected: list[tuple[str, str]]) -> None:
    assert citations(text) == expected


def test_the_notes_are_recognised() -> None:
    design, specs = (f"{n}.md" for n in NOTES)
    assert OUTSIDE.search(f'{design} "Receipts"') and OUTSIDE.search(f"({specs} rule 1)")
    assert OUTSIDE.search(f"({NOTES[0]} rule 4)") and OUTSIDE.search(f'{NOTES[1]} "RFC 3161"')
    assert not OUTSIDE.search("DESIGNATED") and not OUTSIDE.search("docs/design.md")
