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

Every record on the path is verified (``audit_verify.check_item``: record digest, leaf,
signed checkpoint, inclusion proof, anchors), and a parent logged in the same log must have a
lower index than its child (``parent_logged_later``). A parent digest found in none of the
given runs is reported as unknown (``unknown_parents``), never dropped: the answer is then
incomplete, and ``LineageResult.ok`` is false.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ledger.core.errors import FormatError
from ledger.core.jcs import Json
from ledger.records.decision import record_digest
from ledger_client.audit.timeline import label_of, trust_of
from ledger_client.audit.verify import RecordCheck, check_item, iso_ms
from ledger_client.receipts.run_verify import RunItem
from ledger_client.receipts.verify import ReceiptChecker

__all__ = ["Lineage", "LineageNode", "LineageResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LineageNode:
    """A record on the path: its check, its distance from the start, and its run file."""

    check: RecordCheck
    depth: int
    run_file: str
    problems: tuple[str, ...]

    @property
    def verified(self) -> bool:
        return self.check.ok and not self.problems

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
            "parents": list(record.parent_digests),
            "verified": self.verified,
            "why_not": c.error or "; ".join(self.problems) or None,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class LineageResult:
    """The records found (the starting ones at depth 0) and the unknown parent digests."""

    direction: str
    start: tuple[str, ...]
    nodes: tuple[LineageNode, ...]
    unknown_parents: tuple[tuple[str, str], ...]  # (child digest, unknown parent digest)

    @property
    def ok(self) -> bool:
        return all(n.verified for n in self.nodes) and not self.unknown_parents

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "direction": self.direction,
            "start": list(self.start),
            "records": [n.to_json_obj() for n in self.nodes],
            "unknown_parents": [{"child": c, "parent": p} for c, p in self.unknown_parents],
            "verified": sum(1 for n in self.nodes if n.verified),
        }


class Lineage:
    """Records of many runs by digest, with children lists (module docstring)."""

    def __init__(
        self, runs: Iterable[tuple[str, Sequence[RunItem]]], checker: ReceiptChecker
    ) -> None:
        self.checker = checker
        self.items: dict[str, tuple[RunItem, str]] = {}
        self.children: dict[str, list[str]] = {}
        for run_file, items in runs:
            for item in items:
                digest = record_digest(item.record).hex()
                self.items.setdefault(digest, (item, run_file))
        for digest, (item, _) in self.items.items():
            if item.record.kind == "run_closed":
                continue  # it closes a run; nothing in it rests on its parents' data
            for parent in item.record.parent_digests:
                self.children.setdefault(parent, []).append(digest)

    def resolve(self, given: str) -> str:
        """A full digest from hex or a unique prefix of at least 8 hex digits."""
        text = given.strip().lower()
        if text in self.items:
            return text
        matches = [d for d in self.items if d.startswith(text)] if len(text) >= 8 else []
        if len(matches) != 1:
            found = "no record" if not matches else f"{len(matches)} records"
            raise FormatError(f"--from {given}: {found} with this digest in the given runs")
        return matches[0]

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
        nodes = [self._node(d, n) for d, n in sorted(depth.items(), key=self._order)]
        return LineageResult(
            direction=direction,
            start=tuple(starts),
            nodes=tuple(nodes),
            unknown_parents=tuple(unknown),
        )

    def _order(self, pair: tuple[str, int]) -> tuple[int, str, int]:
        item = self.items[pair[0]][0]
        return (pair[1], item.record.time, item.receipt.index)

    def _node(self, digest: str, depth: int) -> LineageNode:
        item, run_file = self.items[digest]
        check = check_item(item, self.checker, bytes.fromhex(digest))
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
        return LineageNode(check=check, depth=depth, run_file=run_file, problems=tuple(problems))
