"""Checking many run files in worker processes, for the views that read them all.

``audit_runs(paths, spec, workers)`` reads and checks each run file as ``ledger-verify run``
does (``audit.verify.audit_as_run``) in ``workers`` processes, each with its own checker and
verification cache (``audit.index.CacheSpec``, as the index uses them), and returns the
``(file name, RunAudit)`` pairs in the order given. A file that cannot be read raises its
``FormatError`` as the single-process path does. Used by ``ledger-verify report``.

``map_forked(fn, count, workers)`` is ``[fn(n) for n in range(count)]`` computed in ``workers``
forked processes: they inherit ``fn`` and everything it reads (the report's audits) from this
process, so only the numbers and the results cross between processes. The report renders its
per-run pages with it. Where ``fork`` is not available, or for few items, it runs here.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ledger_client.audit.index import CacheSpec
from ledger_client.audit.verify import RunAudit, audit_as_run
from ledger_client.receipts.run_load import load_run
from ledger_client.receipts.verify import ReceiptChecker

T = TypeVar("T")

__all__ = ["audit_runs", "map_forked"]

_CHUNK = 8  # files per task
_CHECKER: list[ReceiptChecker] = []
_STORED: list[frozenset[str]] = [frozenset()]
_FORKED: list[Callable[[int], Any]] = []  # the function map_forked's workers inherit


def _start(spec: CacheSpec, stored: frozenset[str]) -> None:
    _CHECKER[:] = [spec.build()]
    _STORED[:] = [stored]


def _one(path: str) -> tuple[str, RunAudit]:
    return path, audit_as_run(load_run(path), _CHECKER[0], stored=path in _STORED[0])


def audit_runs(
    paths: Sequence[Path],
    spec: CacheSpec,
    workers: int,
    checker: ReceiptChecker | None = None,
    *,
    stored: frozenset[str] = frozenset(),
) -> list[tuple[str, RunAudit]]:
    """Every run file checked (module docstring); ``checker``: the one to use in-process;
    ``stored``: the files (as ``str(path)``) the auditor's index holds a passing verdict for,
    under these trust inputs (``audit_as_run``)."""
    names = [str(p) for p in paths]
    if workers <= 1 or len(names) < 4 * _CHUNK:
        local = checker or spec.build()
        return [(name, audit_as_run(load_run(name), local, stored=name in stored))
                for name in names]  # fmt: skip
    with ProcessPoolExecutor(workers, initializer=_start, initargs=(spec, stored)) as pool:
        return list(pool.map(_one, names, chunksize=_CHUNK))


def _call_forked(n: int) -> Any:
    return _FORKED[0](n)


def map_forked(fn: Callable[[int], T], count: int, workers: int) -> list[T]:
    """``[fn(n) for n in range(count)]``, in forked worker processes (module docstring)."""
    methods = multiprocessing.get_all_start_methods()
    if workers <= 1 or count < 4 * _CHUNK or "fork" not in methods:
        return [fn(n) for n in range(count)]
    _FORKED[:] = [fn]
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            return list(pool.map(_call_forked, range(count), chunksize=_CHUNK))
    finally:
        _FORKED.clear()
