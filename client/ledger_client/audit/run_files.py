"""Finding run files for the audit commands (``lineage``, ``report``, ``index``).

A run is a JSON-lines file of ``{"record", "receipt"}`` items or a folder of ``*.json`` items
(``ledger_client.receipts.run_load.load_run``). A path given to an audit command is a run file, a
run folder, or a folder holding run files (``*.jsonl``, searched recursively). The SDK's private
disclosure files (``*.disclosures.jsonl``, ``ledger_client.receipts.disclose``) are never runs and
are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from ledger.core.errors import FormatError

__all__ = ["PRIVATE_SUFFIX", "run_paths"]

PRIVATE_SUFFIX = ".disclosures.jsonl"


def _is_run_file(path: Path) -> bool:
    return path.is_file() and path.suffix == ".jsonl" and not path.name.endswith(PRIVATE_SUFFIX)


def run_paths(paths: Sequence[str]) -> Iterator[Path]:
    """Every run (file or ``*.json`` folder) under ``paths``, sorted per given path."""
    for given in paths:
        where = Path(given)
        if where.is_file():
            yield where
        elif where.is_dir():
            files = sorted(p for p in where.rglob("*.jsonl") if _is_run_file(p))
            if files:
                yield from files
            elif any(where.glob("*.json")):
                yield where
            else:
                raise FormatError(f"{given}: no run files (*.jsonl) or run items (*.json) in it")
        else:
            raise FormatError(f"{given}: no such file or folder")
