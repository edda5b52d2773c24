"""Finding run files for the audit commands (``lineage``, ``report``, ``index``).

A run is a JSON-lines file of ``{"record", "receipt"}`` items or a folder of ``*.json`` items
(``ledger_client.receipts.run_load.load_run``). A path given to an audit command is a run file, a
run folder, or a folder holding run files (``*.jsonl``, searched recursively). The SDK's private
disclosure files (``*.disclosures.jsonl``, ``ledger_client.receipts.disclose``) are never runs and
are skipped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from ledger.core.errors import FormatError

__all__ = ["PRIVATE_SUFFIX", "run_paths"]

PRIVATE_SUFFIX = ".disclosures.jsonl"


def _run_files(folder: Path) -> list[Path]:
    """The files under ``folder`` whose suffix is ``.jsonl`` (not ``PRIVATE_SUFFIX``), sorted:
    what ``rglob("*.jsonl")`` and ``is_file()`` find, from one ``scandir`` per folder (an index
    or lineage lists 10,000 files). Symbolic links to folders are not followed, as ``rglob``
    does not; a link to a file counts as the file."""
    found: list[Path] = []
    pending = [folder]
    while pending:
        where = pending.pop()
        try:
            with os.scandir(where) as entries:
                listed = list(entries)
        except PermissionError:
            continue
        for entry in listed:
            if entry.is_dir(follow_symlinks=False):
                pending.append(where / entry.name)
            elif (
                entry.name.endswith(".jsonl")
                and entry.name != ".jsonl"  # a dot file: no suffix
                and not entry.name.endswith(PRIVATE_SUFFIX)
                and entry.is_file()
            ):
                found.append(where / entry.name)
    return sorted(found, key=lambda p: p.parts)  # path order, without Path comparisons


def run_paths(paths: Sequence[str]) -> Iterator[Path]:
    """Every run (file or ``*.json`` folder) under ``paths``, sorted per given path."""
    for given in paths:
        where = Path(given)
        if where.is_file():
            yield where
        elif where.is_dir():
            files = _run_files(where)
            if files:
                yield from files
            elif any(where.glob("*.json")):
                yield where
            else:
                raise FormatError(f"{given}: no run files (*.jsonl) or run items (*.json) in it")
        else:
            raise FormatError(f"{given}: no such file or folder")
