"""Checking many run files in worker processes, for the views that read them all.

``audit_runs(paths, spec, workers)`` reads and checks each run file as ``ledger-verify run``
does (``audit.verify.audit_as_run``) in ``workers`` processes, each with its own checker and
verification cache (``audit.index.CacheSpec``, as the index uses them), and returns the
``(file name, RunAudit)`` pairs in the order given. A file that cannot be read raises its
``FormatError`` as the single-process path does. Used by ``ledger-verify report`` for a page
of at most 20 runs.

``map_forked(fn, count, workers)`` is ``[fn(n) for n in range(count)]`` computed in ``workers``
forked processes: they inherit ``fn`` and everything it reads (the report's audits) from this
process, so only the numbers and the results cross between processes (``report_html.render_pages``
can render its per-run pages with it). Where ``fork`` is not available, or for few items, it runs
here.

``report_pages(names, spec, workers, plan_of, folder)``: the report over many runs in one pass
of ``workers`` forked processes, each checking a share of the run files and writing their pages
(only each run's summary, the page plan and the verdicts cross between processes: a checked
run is never sent back). ``ledger-verify report`` uses it for more than one page of runs.
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TypeVar

from ledger.fileio.durable import write_file
from ledger.records.commitments import Kept
from ledger_client.audit.index import CacheSpec
from ledger_client.audit.report_html import (
    PagePlan,
    RunSummary,
    run_page,
    run_page_name,
    run_summary,
)
from ledger_client.audit.verdicts import TimePolicy, Verdict
from ledger_client.audit.verify import RunAudit, audit_as_run
from ledger_client.receipts.run_load import load_run
from ledger_client.receipts.verify import ReceiptChecker

T = TypeVar("T")

__all__ = ["audit_runs", "map_forked", "report_pages"]

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


def report_pages(
    names: Sequence[str],
    spec: CacheSpec,
    workers: int,
    plan_of: Callable[[list[RunSummary]], PagePlan],
    folder: Path,
    *,
    checker: ReceiptChecker | None = None,
    stored: frozenset[str] = frozenset(),
    policy: TimePolicy | None = None,
    private: Mapping[str, Sequence[Kept]] | None = None,
) -> tuple[list[RunSummary], PagePlan, list[Verdict]]:
    """``ledger-verify report`` over many runs: every run file checked (``audit_as_run``,
    ``stored`` as for ``audit_runs``) and its page written into ``folder``
    (``report_html.run_page``, not synced: the caller syncs the folder once), by ``workers``
    forked processes that each check and render a share of the runs, so that only each run's
    summary, the page plan (``plan_of``: ``report_html.plan_pages`` over every summary) and
    the verdicts cross between processes. Returns the summaries, the plan and the verdicts,
    in the order of ``names``. A file that cannot be read raises its ``FormatError`` here."""
    count = len(names)
    methods = multiprocessing.get_all_start_methods()
    if workers <= 1 or count < 4 * _CHUNK or "fork" not in methods:
        share = _Share(names, list(range(count)), checker or spec.build(), stored)
        summaries = [s for _, s in share.audit()]
        plan = plan_of(summaries)
        verdicts = [v for _, v in share.render(plan, folder, policy, private)]
        return summaries, plan, verdicts
    context = multiprocessing.get_context("fork")
    pipes, processes = [], []
    for k in range(workers):
        ours, theirs = context.Pipe()
        job = (theirs, names, list(range(k, count, workers)), spec, stored, folder, policy, private)
        process = context.Process(target=_report_worker, args=job, daemon=True)
        process.start()
        theirs.close()
        pipes.append(ours)
        processes.append(process)
    try:
        found: dict[int, RunSummary] = {}
        for pipe in pipes:
            found.update(_answer(pipe))
        summaries = [found[i] for i in range(count)]
        plan = plan_of(summaries)
        for pipe in pipes:
            pipe.send(plan)
        shown: dict[int, Verdict] = {}
        for pipe in pipes:
            shown.update(_answer(pipe))
        return summaries, plan, [shown[i] for i in range(count)]
    finally:
        for pipe in pipes:
            pipe.close()
        for process in processes:
            process.join(timeout=5)
            if process.is_alive():  # it failed elsewhere and waits for a plan: not needed
                process.terminate()
                process.join()


def _answer(pipe: Connection) -> list[tuple[int, Any]]:
    status, got = pipe.recv()
    if status == "error":
        raise got
    return list(got)


class _Share:
    """The runs one process checks and renders (``report_pages``)."""

    def __init__(
        self,
        names: Sequence[str],
        share: list[int],
        checker: ReceiptChecker,
        stored: frozenset[str],
    ) -> None:
        self.names, self.share, self.checker, self.stored = names, share, checker, stored
        self.audits: dict[int, RunAudit] = {}

    def audit(self) -> list[tuple[int, RunSummary]]:
        out = []
        for i in self.share:
            name = self.names[i]
            audit = audit_as_run(load_run(name), self.checker, stored=name in self.stored)
            self.audits[i] = audit
            out.append((i, run_summary(name, audit)))
        return out

    def render(
        self,
        plan: PagePlan,
        folder: Path,
        policy: TimePolicy | None,
        private: Mapping[str, Sequence[Kept]] | None,
    ) -> list[tuple[int, Verdict]]:
        page_of = {i: n for n, i in enumerate(plan.order)}
        out = []
        for i in self.share:
            page, verdict = run_page(
                plan, self.names[i], self.audits[i], policy=policy, private=private
            )
            write_file(folder / run_page_name(page_of[i]), page.encode("utf-8"), sync=False)
            out.append((i, verdict))
        return out


def _report_worker(
    pipe: Connection,
    names: Sequence[str],
    share: list[int],
    spec: CacheSpec,
    stored: frozenset[str],
    folder: Path,
    policy: TimePolicy | None,
    private: Mapping[str, Sequence[Kept]] | None,
) -> None:
    """A forked process of ``report_pages``: its share checked, summaries sent; the plan
    received, its pages written, verdicts sent. An error is sent back, to be raised there."""
    try:
        mine = _Share(names, share, spec.build(), stored)
        pipe.send(("ok", mine.audit()))
        plan = pipe.recv()
        pipe.send(("ok", mine.render(plan, folder, policy, private)))
    except EOFError:  # the parent stopped (another process failed)
        pass
    except Exception as exc:
        with contextlib.suppress(OSError):
            pipe.send(("error", exc))
    finally:
        pipe.close()
