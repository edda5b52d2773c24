"""The run context across threads and child processes (docs/sdk.md "Threads and processes").

* Threads, automatic: while a ledger run is open, a ``threading.Thread`` started where a run's
  frame is current runs in a copy of its starter's context (``contextvars.copy_context``), as
  asyncio tasks and ``asyncio.to_thread`` already do; so a decorated call in a plain thread
  lands in its starter's run even when several runs are open. ``ledger_run`` installs this
  (``propagate_threads``); threads started where no frame is current are untouched.
  ``ContextThreadPoolExecutor`` does the same for pools, ``in_context(fn)`` for any callable.
* Child processes, a helper: a child process has its own memory, so records reach the parent's
  run through a connection. In the parent, ``handle = share_run(run)`` (a picklable
  ``RunHandle``: address and one-time key of a local listener); in the child, ``with
  join_run(handle):`` makes a proxy run current whose records the parent numbers and emits (its
  steps, parents and lock), so they land in the right run with their parents.
  ``ledger_process(target, *args)`` starts a ``multiprocessing.Process`` that does both.
"""

from __future__ import annotations

import multiprocessing
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from ledger.records.commitments import Kept
from ledger.records.decision import DecisionRecord, Payload
from ledger_client.sdk.classify import Clear
from ledger_client.sdk.context import (
    Frame,
    Run,
    RunEntry,
    current_frame,
    enter_frame,
    in_context,
    leave_frame,
    propagate_threads,
)
from ledger_client.sdk.errors import RunStateError

__all__ = [
    "RunHandle",
    "in_context",
    "join_run",
    "ledger_process",
    "propagate_threads",
    "share_run",
]

# --- child processes ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunHandle:
    """What a child process needs to join a run: the listener's address and key, the run."""

    address: str
    authkey: bytes
    run_id: str
    heads: tuple[str, ...]


def share_run(run: Run, frame: Frame | None = None) -> RunHandle:
    """Serve ``run`` to child processes (a local listener thread, closed with the run); the
    handle starts at ``frame``'s frontier (default: the current frame, else the root)."""
    frame = frame or current_frame() or run.root
    if frame.run is not run:
        raise RunStateError("the frame belongs to another run")
    key = secrets.token_bytes(32)
    listener = Listener(family="AF_UNIX", authkey=key)
    run.on_close(listener.close)
    threading.Thread(
        target=_serve, args=(run, listener), name=f"ledger-share-{run.run_id}", daemon=True
    ).start()
    return RunHandle(str(listener.address), key, run.run_id, frame.heads)


def _serve(run: Run, listener: Listener) -> None:
    with listener:
        while run.closed is None:
            try:
                conn = listener.accept()
            except OSError:
                return
            threading.Thread(target=_answer, args=(run, conn), daemon=True).start()


def _answer(run: Run, conn: Connection) -> None:
    with conn:
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                return
            payload, parents, disclosures, clear, fields = request
            try:
                entry = run.emit(
                    payload, parents=parents, disclosures=disclosures, clear=clear, **fields
                )
                conn.send(("ok", entry.record, entry.digest, entry.disclosures))
            except Exception as exc:  # the child raises it; the parent keeps serving
                conn.send(("error", f"{type(exc).__name__}: {exc}", None, None))


class _ChildRun(Run):
    """A run in a child process whose records the parent's run numbers and emits."""

    def __init__(self, handle: RunHandle, conn: Connection) -> None:
        super().__init__(_NoSink(), agent="(child)", run_id=handle.run_id, links="sequence")
        self.root.heads = self.root.start = handle.heads
        self._conn = conn

    def _emit(
        self,
        frame: Frame,
        payload: Payload,
        disclosures: tuple[Kept, ...],
        fields: Any,
        parents: tuple[str, ...] | None = None,
        *,
        clear: Clear = (),
    ) -> RunEntry:
        named = frame.heads if parents is None else parents
        self._conn.send((payload, list(named), list(disclosures), clear, dict(fields)))
        status, record, digest, kept = self._conn.recv()
        if status != "ok":
            raise RunStateError(f"the parent's run refused the record: {record}")
        entry = RunEntry(record, digest, tuple(kept))
        self._entries.append(entry)
        frame.heads = (digest.hex(),)
        return entry


class _NoSink:
    def submit(self, record: DecisionRecord, *, disclosures: Sequence[Kept] = ()) -> bytes:
        raise RunStateError("a child's records go through the parent")

    def flush(self, timeout: float | None = None, *, checkpoint: bool = False) -> bool:
        return True

    def receipts(self, digests: Sequence[bytes], *, timeout: float = 30.0) -> list[Any]:
        raise RunStateError("ask the parent's run for receipts")


@contextmanager
def join_run(handle: RunHandle) -> Iterator[Run]:
    """In a child process: make the shared run current (its records go to the parent)."""
    with Client(handle.address, authkey=handle.authkey) as conn:
        run = _ChildRun(handle, conn)
        token = enter_frame(run.root)
        try:
            yield run
        finally:
            leave_frame(token)


def _child_main(handle: RunHandle, target: Callable[..., Any], args: tuple[Any, ...]) -> None:
    with join_run(handle):
        target(*args)


def ledger_process(
    target: Callable[..., Any], *args: Any, context: str | None = None
) -> multiprocessing.process.BaseProcess:
    """Start a child process running ``target(*args)`` inside the current run (``share_run``
    + ``join_run``); ``context``: the multiprocessing start method (default: the platform's).
    Returns the started process (``join()`` it)."""
    frame = current_frame()
    if frame is None:
        raise RunStateError("no ledger run is open here; use `with ledger_run(...)`")
    handle = share_run(frame.run, frame)
    make = multiprocessing.get_context(context).Process  # type: ignore[attr-defined]
    process: multiprocessing.process.BaseProcess = make(
        target=_child_main, args=(handle, target, args)
    )
    process.start()
    return process
