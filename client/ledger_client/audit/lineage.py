"""Lineage across runs: which records rest on a given record, or what a record rests on.

Pure over loaded runs (the CLI reads the files). docs/design.md "Decision record (v1)": records link
to their parents by digest (``parent_digests``), within a run or across runs
(``ledger_client.sdk.links``). ``Lineage`` indexes every record of the given runs by digest and
walks that graph:

* ``descendants(start)``: every record with ``start`` among its ancestors (what rests on it;
  ``run_closed`` records, which name a run's last records as parents, are left out);
* ``ancestors(start)``: every record ``start`` rests on;
* ``tainted(labels)``: every ``memory_write`` whose trust label is one of ``labels`` (default
  ``untrusted``), and every record descending from one.

No silent OK: before anything is claimed, every run given is checked as ``ledger-verify run``
checks it (``audit_verify.audit_as_run``: every receipt, completeness and order against its
``run_closed`` record), and every record gets its verdict (``ledger_client.audit.verdicts``:
receipt, run problems, time, lineage), so a record relabelled, dropped or altered in any run
makes the answer fail even when it is not on the path walked. ``LineageResult.runs`` names
every run examined, whether it passed, and where its verdict came from (``verified now``).
A parent logged in the same log must have a lower index than its child
(``parent_logged_later``). A parent digest found in none of the given runs is reported as
unknown (``unknown_parents``), never dropped: the answer is then incomplete, and
``LineageResult.ok`` is false. A start digest in none of the runs is ``find``'s None: the CLI
says "source not found", never "0 records".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ledger.core.errors import FormatError
from ledger.core.jcs import Json
from ledger_client.audit.timeline import TimelineRow, label_of, timeline, trust_of
from ledger_client.audit.verdicts import VERIFIED_NOW, TimePolicy, Verdict, run_checks
from ledger_client.audit.verify import RecordCheck, audit_as_run, iso_ms
from ledger_client.receipts.run_verify import RunItem
from ledger_client.receipts.verify import ReceiptChecker

__all__ = ["Lineage", "LineageNode", "LineageResult", "RunExamined"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunExamined:
    """One run file read: its run id, its checks, and where the verdict came from."""

    run_file: str
    run_id: str | None
    verdict: Verdict
    source: str = VERIFIED_NOW

    @property
    def ok(self) -> bool:
        return self.verdict.ok

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "run_file": self.run_file,
            "run_id": self.run_id,
            "verified": self.ok,
            "source": self.source,
            "verdict": self.verdict.to_json_obj(),
        }

    def line(self) -> str:
        state = "verified" if self.ok else "NOT VERIFIED: " + "; ".join(self.verdict.notes())
        if self.ok and self.verdict.notes():
            state += " (warning: " + "; ".join(self.verdict.notes()) + ")"
        return f"  run {self.run_id} ({self.run_file}): {state} [{self.source}]"


@dataclass(frozen=True, slots=True, kw_only=True)
class LineageNode:
    """A record on the path: its check, its distance from the start, and its run file."""

    check: RecordCheck
    depth: int
    run_file: str
    problems: tuple[str, ...]
    row: TimelineRow
    source: str = VERIFIED_NOW

    @property
    def verified(self) -> bool:
        return self.row.verified and not self.problems

    @property
    def not_linked(self) -> bool:
        """The record took inputs but names no parent (``verdicts.lineage_check``)."""
        found = self.row.verdict.named("lineage")
        return found is not None and found.status == "warning"

    @property
    def why_not(self) -> str | None:
        return (
            "; ".join([*([self.row.why_not] if self.row.why_not else []), *self.problems]) or None
        )

    def to_json_obj(self) -> dict[str, Json]:
        c, record = self.check, self.check.record
        return {
            "record_digest": c.digest,
            "depth": self.depth,
            "kind": record.kind,
            "step": record.step,
            "run_id": record.run_id,
            "run_file": self.run_file,
            "agent": record.agent,
            "label": label_of(record),
            "trust_label": trust_of(record),
            "time": record.time,
            "logged_at": iso_ms(c.logged_at_ms),
            "index": c.index,
            "time_difference_ms": self.row.to_json_obj()["time_difference_ms"],
            "parents": list(record.parent_digests),
            "inferred_parents": list(self.row.inferred),
            "verified": self.verified,
            "why_not": self.why_not,
            "warnings": list(self.row.warnings),
            "verdict": self.row.verdict.to_json_obj(),
            "source": self.source,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class LineageResult:
    """The records found (the starting ones at depth 0) and the unknown parent digests."""

    direction: str
    start: tuple[str, ...]
    nodes: tuple[LineageNode, ...]
    unknown_parents: tuple[tuple[str, str], ...]  # (child digest, unknown parent digest)
    runs: tuple[RunExamined, ...] = ()

    @property
    def failed_runs(self) -> list[RunExamined]:
        return [r for r in self.runs if not r.ok]

    @property
    def ok(self) -> bool:
        return (
            all(n.verified for n in self.nodes)
            and not self.unknown_parents
            and not self.failed_runs
        )

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "direction": self.direction,
            "start": list(self.start),
            "records": [n.to_json_obj() for n in self.nodes],
            "unknown_parents": [{"child": c, "parent": p} for c, p in self.unknown_parents],
            "verified": sum(1 for n in self.nodes if n.verified),
            "runs": [r.to_json_obj() for r in self.runs],
            "failed_runs": [r.run_file for r in self.failed_runs],
            "not_linked": [n.check.digest for n in self.nodes if n.not_linked],
        }


class Lineage:
    """Records of many runs by digest, with children lists (module docstring)."""

    def __init__(
        self,
        runs: Iterable[tuple[str, Sequence[RunItem]]],
        checker: ReceiptChecker,
        *,
        policy: TimePolicy | None = None,
    ) -> None:
        self.checker = checker
        self.items: dict[str, tuple[RunItem, str]] = {}
        self.rows: dict[str, TimelineRow] = {}
        self.children: dict[str, list[str]] = {}
        examined = []
        for run_file, items in runs:
            audit = audit_as_run(items, checker)  # the whole run, as `ledger-verify run`
            rows = timeline(audit, policy)
            verdict = run_checks(audit, [(r.check, r.verdict) for r in rows])
            examined.append(RunExamined(run_file=run_file, run_id=audit.run_id, verdict=verdict))
            for row in rows:
                self.rows.setdefault(row.check.digest, row)
            for item in items:
                self.items.setdefault(item.digest, (item, run_file))
        self.runs = tuple(examined)
        for digest, (item, _) in self.items.items():
            if item.record.kind == "run_closed":
                continue  # it closes a run; nothing in it rests on its parents' data
            for parent in item.record.parent_digests:
                self.children.setdefault(parent, []).append(digest)

    def find(self, given: str) -> str | None:
        """A full digest from hex or a unique prefix of at least 8 hex digits; None when no
        record of the given runs has it (``FormatError``: a prefix too short or ambiguous)."""
        text = given.strip().lower()
        if text in self.items:
            return text
        if len(text) < 8 or set(text) - set("0123456789abcdef"):
            raise FormatError(f"--from {given}: give a digest or at least 8 of its hex digits")
        matches = [d for d in self.items if d.startswith(text)]
        if len(matches) > 1:
            raise FormatError(f"--from {given}: {len(matches)} records with this digest prefix")
        return matches[0] if matches else None

    def resolve(self, given: str) -> str:
        """``find``, refusing a digest in none of the given runs (``FormatError``)."""
        found = self.find(given)
        if found is None:
            raise FormatError(f"--from {given}: source not found in the given runs")
        return found

    def tainted_starts(self, labels: Sequence[str]) -> list[str]:
        """Digests of ``memory_write`` records whose trust label is one of ``labels``."""
        return [d for d, (item, _) in self.items.items() if trust_of(item.record) in labels]

    def walk(self, starts: Sequence[str], direction: str) -> LineageResult:
        """Breadth-first from ``starts`` (``descendants`` or ``ancestors``), all verified."""
        depth = {s: 0 for s in starts}
        queue = deque(starts)
        unknown: list[tuple[str, str]] = []
        while queue:
            digest = queue.popleft()
            record = self.items[digest][0].record
            nexts = (
                self.children.get(digest, [])
                if direction == "descendants"
                else list(record.parent_digests)
            )
            for other in nexts:
                if other not in self.items:
                    unknown.append((digest, other))
                elif other not in depth:
                    depth[other] = depth[digest] + 1
                    queue.append(other)
        unknown += [
            (d, p)
            for d in depth
            for p in self.items[d][0].record.parent_digests
            if p not in self.items and (d, p) not in unknown
        ]
        nodes = [self.node(d, n) for d, n in sorted(depth.items(), key=self._order)]
        return LineageResult(
            direction=direction,
            start=tuple(starts),
            nodes=tuple(nodes),
            unknown_parents=tuple(unknown),
            runs=self.runs,
        )

    def _order(self, pair: tuple[str, int]) -> tuple[int, str, int]:
        item = self.items[pair[0]][0]
        return (pair[1], item.record.time, item.receipt.index)

    def node(self, digest: str, depth: int) -> LineageNode:
        """The record ``digest`` at ``depth`` with its checks and parent-order problems."""
        item, run_file = self.items[digest]
        row = self.rows[digest]
        problems = []
        for parent in item.record.parent_digests:
            found = self.items.get(parent)
            if found is None:
                continue
            before = found[0].receipt
            same_log = (
                before.checkpoint.split("\n", 1)[0] == item.receipt.checkpoint.split("\n", 1)[0]
            )
            if same_log and before.index >= item.receipt.index:
                problems.append(
                    f"parent_logged_later: parent {parent[:12]} is at index {before.index}, "
                    f"not before {item.receipt.index}"
                )
        return LineageNode(
            check=row.check, depth=depth, run_file=run_file, problems=tuple(problems), row=row
        )
