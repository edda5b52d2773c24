"""Never sign below known evidence: what others saw of this log, weighed against the local tree.

One interface, ``EvidenceSink``, takes what any outside party reports: a log-signed checkpoint
(a mirror, a monitor, later the object-store bucket: ``observe_checkpoint``), a witness's size
(the ``text/x.tlog.size`` body of a 409: ``observe_size``), a witness refusing a proof the log
built from its own tree (a 422, or a 409 at the submitted size: ``observe_refusal``), and a
witness agreeing (``observe_agreement``). ``Evidence`` is the log's sink; the witnessing client
(``ledger.log.witnessing``) feeds it at start and after every checkpoint.

What it does with them (c2sp.org/tlog-witness; never two roots for one size, docs/design.md
"Rules of the house"):

* a checkpoint signed by this log that is larger than the local tree, or has another root at a
  size the tree holds: **halt** (the larger one is written to the high-water mark first, so a
  restart refuses too);
* a 422 on a consistency proof built from the local tree, or a 409 at the submitted size (the
  witness holds another root there): **halt**;
* witnesses reporting a size larger than the local tree: from ``quorum`` of them a **halt**,
  from fewer an **alert** (a WARNING line, ``ledger_evidence_alert``; health stays SERVING,
  since gRPC health has no "degraded" status; the metric is the degraded signal);
* a halted log serves reads but signs and appends nothing (``ReadOnlyError``: gRPC
  FAILED_PRECONDITION), gRPC health turns NOT_SERVING, ``ledger_evidence_halted`` is 1 and one
  ERROR line names the evidence. It lasts until the process ends; the way out is
  ``ledger restore catch-up`` (the missing entries, checked against the published root) or
  ``ledger restore accept``.

A log can also start *unconfirmed* (read-only, health SERVING for reads): a non-empty data dir
without a high-water mark, or witnesses that did not answer the start check within
``[witnessing] start_timeout_s``. Agreement lifts it: for a missing mark, ``quorum`` witnesses
(or one verified checkpoint of this log whose root the tree holds); after a start check that
went unanswered, ``n - quorum + 1`` witnesses, the fewest that must include one witness of any
quorum that cosigned the newest checkpoint.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ledger.core.checkpoint import open_checkpoint
from ledger.core.errors import LedgerError
from ledger.core.note import Verifier
from ledger.core.types import PublishedCheckpoint

__all__ = ["Evidence", "EvidenceSink", "Finding", "GuardedLog"]

_log = logging.getLogger("ledger.evidence")
MAX_FINDINGS = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One piece of evidence: who reported what."""

    source: str
    kind: str  # "larger", "fork", "refused"
    size: int
    detail: str

    def line(self) -> str:
        """The evidence in one line."""
        return f"{self.kind} from {self.source} at size {self.size}: {self.detail}"


class EvidenceSink(Protocol):
    """Where anything that saw this log's checkpoints reports them."""

    def observe_checkpoint(self, source: str, note: str) -> None: ...
    def observe_size(self, source: str, size: int) -> None: ...
    def observe_refusal(self, source: str, size: int, detail: str) -> None: ...
    def observe_agreement(self, source: str, size: int) -> None: ...


class GuardedLog(Protocol):
    """What the sink needs from the log (``ledger.log.facade.Log``)."""

    @property
    def size(self) -> int: ...
    @property
    def origin(self) -> str: ...
    @property
    def unconfirmed(self) -> str | None: ...
    def root_at(self, size: int) -> bytes: ...
    def halt(self, reason: str, checkpoint: PublishedCheckpoint | None = None) -> bool: ...
    def confirm(self, why: str) -> bool: ...


class Evidence:
    """The log's ``EvidenceSink`` (module docstring). Thread-safe."""

    def __init__(
        self,
        *,
        log: GuardedLog,
        verifiers: Sequence[Verifier],
        witnesses: Sequence[str],
        quorum: int,
    ) -> None:
        self._log = log
        self._verifiers = list(verifiers)
        self._witnesses = set(witnesses)
        self.quorum = quorum
        self._lock = threading.Lock()
        self._larger: dict[str, int] = {}  # witness -> size it reported beyond the tree
        self._agreed: set[str] = set()
        self._needed = quorum  # agreements that lift an unconfirmed start
        self.findings: deque[Finding] = deque(maxlen=MAX_FINDINGS)
        self.halted: Finding | None = None
        self.listeners: list[Callable[[], None]] = []  # told after each change of state

    # --- the sink ----------------------------------------------------------------------------

    def observe_checkpoint(self, source: str, note: str) -> None:
        """A checkpoint note someone holds: halts when it is this log's and beyond the tree."""
        try:
            verified = open_checkpoint(note, self._verifiers, origin=self._log.origin)
        except LedgerError as exc:
            _log.warning("ignoring a checkpoint from %s that is not this log's: %s", source, exc)
            return
        cp = verified.checkpoint
        size = self._log.size
        if cp.size > size:
            published = PublishedCheckpoint(
                origin=cp.origin, size=cp.size, root_hash=cp.root_hash, note=note
            )
            detail = (
                f"a checkpoint signed by this log has size {cp.size}, the local tree {size}: "
                "the data dir was rolled back"
            )
            self._halt(Finding(source=source, kind="larger", size=cp.size, detail=detail),
                       published)  # fmt: skip
            return
        if self._log.root_at(cp.size) != cp.root_hash:
            detail = (
                f"a checkpoint signed by this log has root {cp.root_hash.hex()} at size "
                f"{cp.size}, the local tree {self._log.root_at(cp.size).hex()}: a second root"
            )
            self._halt(Finding(source=source, kind="fork", size=cp.size, detail=detail))
            return
        if self._log.unconfirmed is not None:
            self._confirm(f"{source} holds checkpoint {cp.size}, consistent with the tree")

    def observe_size(self, source: str, size: int) -> None:
        """A witness's size (409): beyond the tree it is an alert, from a quorum a halt."""
        if size <= self._log.size:
            self.observe_agreement(source, size)
            return
        with self._lock:
            known = self._larger.get(source)
            self._larger[source] = size
            self._agreed.discard(source)
            count = self._count_larger()
        detail = f"the witness cosigned size {size}, the local tree has {self._log.size}"
        finding = Finding(source=source, kind="larger", size=size, detail=detail)
        if count >= self.quorum:
            self._halt(finding, quorum=count)
            return
        self.findings.append(finding)
        if known != size:
            _log.warning(
                "EVIDENCE ALERT (%d of quorum %d): %s; the log may have been rolled back",
                count, self.quorum, finding.line(),
            )  # fmt: skip
        self._changed()

    def observe_refusal(self, source: str, size: int, detail: str) -> None:
        """A witness refused a proof built from the local tree, or holds another root at the
        submitted size: the log's history differs from what it published."""
        self._halt(Finding(source=source, kind="fork", size=size, detail=detail))

    def observe_agreement(self, source: str, size: int) -> None:
        """A witness cosigned, or is at a size the tree covers."""
        with self._lock:
            had = self._larger.pop(source, None)
            self._agreed.add(source)
            agreed = len(self._agreed & self._witnesses)
        if had is not None:
            self._changed()
        if self._log.unconfirmed is not None and agreed >= self._needed:
            self._confirm(f"{agreed} witness(es) are at or below the tree (latest {size})")

    # --- start ----------------------------------------------------------------------------

    def require(self, needed: int) -> None:
        """The number of witness agreements that lift an unconfirmed start."""
        self._needed = needed

    @property
    def agreed(self) -> int:
        """Witnesses that agreed since the start."""
        with self._lock:
            return len(self._agreed & self._witnesses)

    @property
    def alerts(self) -> int:
        """Witnesses reporting a size beyond the tree (fewer than the quorum, or a halt)."""
        with self._lock:
            return self._count_larger()

    # --- internals ------------------------------------------------------------------------

    def _count_larger(self) -> int:
        size = self._log.size
        return sum(1 for s in self._larger.values() if s > size)

    def _halt(
        self,
        finding: Finding,
        checkpoint: PublishedCheckpoint | None = None,
        *,
        quorum: int | None = None,
    ) -> None:
        self.findings.append(finding)
        by = "" if quorum is None else f" ({quorum} witnesses of quorum {self.quorum})"
        reason = (
            f"halted on evidence{by}: {finding.line()}. The log serves reads but signs and "
            "appends nothing: bring the missing entries back with `ledger restore catch-up`, "
            "or `ledger restore accept` this tree"
        )
        if self._log.halt(reason, checkpoint):
            self.halted = finding
            _log.error("HALTED: %s", reason)
        self._changed()

    def _confirm(self, why: str) -> None:
        if self._log.confirm(why):
            _log.warning("confirmed: %s; the log takes appends", why)
            self._changed()

    def _changed(self) -> None:
        for listener in self.listeners:
            try:
                listener()
            except Exception:
                _log.exception("an evidence listener failed")
