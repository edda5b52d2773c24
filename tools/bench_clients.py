"""Benchmark clients: long-lived worker processes (spawn) that drive the server through
``ledger_client.remote.RemoteLog``.

The parent hands each worker a ``Task``; the worker connects, warms its channel, says "ready",
waits for a common start time, runs the task and sends back an ``Outcome``. Timed tasks run
back-to-back calls in ``threads`` threads for ``warm_s + duration_s`` and keep only the calls
that complete inside the measured window ``[start + warm_s, start + warm_s + duration_s]``.
The loads themselves live in ``tools.bench_loads``.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.process
import queue
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from typing import Any

from ledger_client.remote.log import RemoteLog

__all__ = ["ClientPool", "Outcome", "Task", "Window"]

READY_TIMEOUT_S = 120.0
START_DELAY_S = 0.05


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """What one worker process does (``kind`` names a load in ``tools.bench_loads``)."""

    kind: str
    address: str
    threads: int = 1
    batch: int = 1
    warm_s: float = 0.0
    duration_s: float = 0.0
    count: int = 0  # fill: digests to append
    head_size: int = 0  # proofs: the signed tree size to draw sizes under
    head_root: bytes = b""
    validate: int = 0  # proofs: how many answers to verify after the window
    seed: int = 0
    url: str = ""  # tiles (B11): the tlog-tiles base URL to GET from
    rpc: str = ""  # raw: the LedgerService method ("AppendPacked" or "AppendRecords")
    requests: int = 0  # raw: distinct requests encoded before the start (then reused)
    rate: float = 0.0  # append: records/s this process offers (0: as fast as it can)


@dataclass(slots=True)
class Outcome:
    """What one worker measured (calls and records completed inside the window)."""

    calls: int = 0
    records: int = 0
    errors: int = 0
    first_error: str = ""
    latencies_ms: list[float] = field(default_factory=list)
    extra_ms: list[float] = field(default_factory=list)  # probe: ack -> checkpoint; stream: acks
    validated: int = 0
    invalid: int = 0
    first_invalid: str = ""
    elapsed_s: float = 0.0  # fill: start to the last completed append
    cpu_s: float = 0.0
    reused: int = 0  # raw: calls that resent an already sent request (the pool ran out)

    def error(self, exc: BaseException) -> None:
        """Count a failed call, keeping the first message."""
        self.errors += 1
        self.first_error = self.first_error or f"{type(exc).__name__}: {exc}"

    def merge(self, other: Outcome) -> None:
        """Add another thread's counts and samples into this one."""
        self.calls += other.calls
        self.records += other.records
        self.errors += other.errors
        self.first_error = self.first_error or other.first_error
        self.latencies_ms.extend(other.latencies_ms)
        self.extra_ms.extend(other.extra_ms)
        self.validated += other.validated
        self.invalid += other.invalid
        self.first_invalid = self.first_invalid or other.first_invalid
        self.elapsed_s = max(self.elapsed_s, other.elapsed_s)
        self.cpu_s += other.cpu_s
        self.reused += other.reused


@dataclass(frozen=True, slots=True)
class Window:
    """The shared start time and the measured window after the warm-up."""

    start: float
    begin: float
    end: float

    @classmethod
    def of(cls, task: Task, start: float) -> Window:
        """The window of ``task`` when all workers start at ``start`` (``time.monotonic``)."""
        begin = start + task.warm_s
        return cls(start=start, begin=begin, end=begin + task.duration_s)

    def inside(self, t: float) -> bool:
        """True when a call completing at ``t`` counts."""
        return self.begin <= t <= self.end


def sleep_until(t: float) -> None:
    """Sleep until ``time.monotonic()`` reaches ``t`` (system-wide on Linux)."""
    delay = t - time.monotonic()
    if delay > 0:
        time.sleep(delay)


# --- the worker process ---------------------------------------------------------------------


def _remote_for(remotes: dict[str, RemoteLog], address: str) -> RemoteLog:
    if address not in remotes:
        for old in remotes.values():
            old.close()
        remotes.clear()
        remotes[address] = RemoteLog(address, timeout=120)
    return remotes[address]


def worker_main(wid: int, inbox: Queue[Any], outbox: Queue[Any]) -> None:
    """Serve tasks from ``inbox`` until it yields None."""
    from tools.bench_loads import prepare_task, run_task

    remotes: dict[str, RemoteLog] = {}
    while (task := inbox.get()) is not None:
        try:
            remote = _remote_for(remotes, task.address)
            remote.checkpoint()  # connect and warm the channel
            prepared = prepare_task(task)  # e.g. encode the raw requests, before the clock runs
            outbox.put(("ready", wid, None))
            start = inbox.get()
            cpu = time.process_time()
            outcome = run_task(task, remote, Window.of(task, start), prepared)
            outcome.cpu_s = time.process_time() - cpu
            outbox.put(("done", wid, outcome))
        except BaseException:
            outbox.put(("error", wid, traceback.format_exc()))
    for remote in remotes.values():
        remote.close()


# --- the parent's side ----------------------------------------------------------------------


class ClientPool:
    """``size`` spawned worker processes; task ``i`` of a launch goes to worker ``i``."""

    def __init__(self, size: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._inboxes: list[Queue[Any]] = [ctx.Queue() for _ in range(size)]
        self._outbox: Queue[Any] = ctx.Queue()
        self._procs: list[multiprocessing.process.BaseProcess] = [
            ctx.Process(target=worker_main, args=(i, inbox, self._outbox), daemon=True)
            for i, inbox in enumerate(self._inboxes)
        ]
        for proc in self._procs:
            proc.start()

    @property
    def size(self) -> int:
        """Number of worker processes."""
        return len(self._procs)

    def launch(self, tasks: list[Task]) -> float:
        """Hand out ``tasks``, wait until every worker is ready, start them; return the start."""
        if len(tasks) > self.size:
            raise ValueError(f"{len(tasks)} tasks for {self.size} workers")
        for inbox, task in zip(self._inboxes, tasks, strict=False):
            inbox.put(task)
        self._expect("ready", len(tasks), READY_TIMEOUT_S)
        start = time.monotonic() + START_DELAY_S
        for inbox in self._inboxes[: len(tasks)]:
            inbox.put(start)
        return start

    def collect(self, n: int, timeout_s: float) -> list[Outcome]:
        """The outcomes of the ``n`` launched tasks, in worker order."""
        done = self._expect("done", n, timeout_s)
        return [done[i] for i in sorted(done)]

    def _expect(self, what: str, n: int, timeout_s: float) -> dict[int, Any]:
        got: dict[int, Any] = {}
        deadline = time.monotonic() + timeout_s
        while len(got) < n:
            try:
                kind, wid, payload = self._outbox.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"workers not {what} after {timeout_s:.0f} s") from None
            if kind == "error":
                raise RuntimeError(f"bench worker {wid} failed:\n{payload}")
            if kind != what:
                raise RuntimeError(f"bench worker {wid} said {kind!r}, expected {what!r}")
            got[wid] = payload
        return got

    def close(self) -> None:
        """Stop the workers."""
        for inbox in self._inboxes:
            inbox.put(None)
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
