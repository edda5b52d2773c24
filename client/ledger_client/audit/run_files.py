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

__all__ = ["PRIVATE_SUFFIX", "run_path_names", "run_paths"]

PRIVATE_SUFFIX = ".disclosures.jsonl"


def _run_files(folder: Path) -> list[Path]:
    """The files under ``folder`` whose suffix is ``.jsonl`` (not ``PRIVATE_SUFFIX``), sorted:
    what ``rglob("*.jsonl")`` and ``is_file()`` find, from one ``scandir`` per folder (an index
    or lineage lists 10,000 files). Symbolic links to folders are not followed, as ``rglob``
    does not; a link to a file counts as the file."""
    return [folder.joinpath(*parts) for parts in _run_file_parts(folder)]


def _run_file_parts(folder: Path) -> list[tuple[str, ...]]:
    """``_run_files`` as the names of each file's folders and its own name below ``folder``,
    in path order (10,000 tuples cost less than 10,000 ``Path`` objects)."""
    found: list[tuple[str, ...]] = []
    pending: list[tuple[str, ...]] = [()]
    while pending:
        below = pending.pop()
        try:
            with os.scandir(folder.joinpath(*below)) as entries:
                listed = list(entries)
        except PermissionError:
            continue
        for entry in listed:
            name = entry.name
            if entry.is_dir(follow_symlinks=False):
                pending.append((*below, name))
            elif (
                name.endswith(".jsonl")
                and name != ".jsonl"  # a dot file: no suffix
                and not name.endswith(PRIVATE_SUFFIX)
                and entry.is_file()
            ):
                found.append((*below, name))
    found.sort()  # the order of ``Path.parts``: the folder's own parts are common to all
    return found


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


def run_path_names(paths: Sequence[str]) -> list[str]:
    """``[str(p) for p in run_paths(paths)]``, the names built as strings (``lineage --db``
    lists 10,000 files)."""
    out: list[str] = []
    for given in paths:
        where = Path(given)
        if not where.is_dir():
            out += [str(p) for p in run_paths([given])]
            continue
        parts = _run_file_parts(where)
        if not parts:
            out += [str(p) for p in run_paths([given])]
            continue
        head = str(where)
        prefix = "" if head == "." else head if head.endswith(os.sep) else head + os.sep
        out += [prefix + os.sep.join(p) for p in parts]
    return out
