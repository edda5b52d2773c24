"""Which runs an agent opened, from the public log: gaps, forks, restarts and chain heads.

Pure: no I/O (the caller reads the log's leaves, e.g. from its tiles). docs/formats.md "Agent
chains". Given the agent's chain key ``KA`` (``ledger.records.agent``), every entry of the log
whose digest starts with the genesis prefix is a chain start (its second half is the chain
id); for each chain, the open beacons ``tag(seq) || ...`` are looked up for seq 0, 1, 2, ...
until ``LOOKAHEAD`` numbers in a row are absent (a number an honest SDK took but never used,
because the agent crashed between taking it and spooling, is skipped). Then, against the runs
presented (their first records):

* **gap** (failed): run #n of chain C was opened at index i and is not among the files;
* **fork** (failed): two openings of one sequence number (two beacons with one tag);
* **unlogged** (failed): a presented run names chain C #n but no opening of it is in the log
  (its first record is not the one opened under that number, or it was never opened);
* **not closed** (warning): a presented run with no ``run_closed`` record (a crash: the records
  come from the spool); it is in the chain, neither a gap nor a fork;
* **restarted** (warning): a chain of the key that started after another one, with the reason
  its run 0 gives (state lost); never a fork;
* the **head** of each chain: its highest sequence number opened in the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ledger.core.jcs import Json
from ledger.records.agent import BEACON_HALF, chain_key, genesis_prefix, open_tag
from ledger.records.decision import DecisionRecord, record_digest
from ledger_client.audit.verdicts import FAILED, OK, WARNING, Check, chain_position

__all__ = ["LOOKAHEAD", "ChainReport", "ChainRun", "ChainState", "scan_chains"]

LOOKAHEAD = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainRun:
    """A presented run: its first record (with the chain link), whether it closed, its file."""

    first: DecisionRecord
    closed: bool
    source: str = ""
    half: bytes = field(init=False)  # the first 16 bytes of the first record's digest

    def __post_init__(self) -> None:
        object.__setattr__(self, "half", record_digest(self.first)[:BEACON_HALF])

    @property
    def key(self) -> tuple[str, int] | None:
        link = self.first.chain
        return None if link is None else (link.id, link.seq)


@dataclass(slots=True, kw_only=True)
class ChainState:
    """One chain as the log shows it."""

    id: str
    genesis_index: int | None
    opens: dict[int, list[tuple[int, bytes]]] = field(default_factory=dict)  # seq -> beacons
    reason: str | None = None
    restarted: bool = False
    head: int | None = None  # the highest sequence number opened in the log

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "id": self.id,
            "genesis_index": self.genesis_index,
            "reason": self.reason,
            "restarted": self.restarted,
            "head": self.head,
            "opened": len(self.opens),
        }


@dataclass(slots=True, kw_only=True)
class ChainReport:
    """Every chain of one agent chain key, and what the presented runs leave out."""

    chains: list[ChainState]
    gaps: list[dict[str, Json]] = field(default_factory=list)
    forks: list[dict[str, Json]] = field(default_factory=list)
    unlogged: list[dict[str, Json]] = field(default_factory=list)
    not_closed: list[dict[str, Json]] = field(default_factory=list)
    run_checks: dict[str, Check] = field(default_factory=dict)  # run_id -> its chain check
    gap_counts: dict[str, int] | None = None  # per chain id, filled once the gaps are known

    @property
    def ok(self) -> bool:
        return not (self.gaps or self.forks or self.unlogged)

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "valid": self.ok,
            "chains": [c.to_json_obj() for c in self.chains],
            "gaps": list(self.gaps),
            "forks": list(self.forks),
            "unlogged": list(self.unlogged),
            "not_closed": list(self.not_closed),
            "runs": {run: check.to_json_obj() for run, check in self.run_checks.items()},
        }

    def lines(self) -> list[str]:
        out = []
        for chain in self.chains:
            head = "none" if chain.head is None else f"#{chain.head}"
            how = "restarted" if chain.restarted else "started"
            at = "?" if chain.genesis_index is None else str(chain.genesis_index)
            why = f": {chain.reason}" if chain.reason else ""
            out.append(
                f"chain {chain.id}: {how} at index {at}{why}; "
                f"{len(chain.opens)} run(s) opened, head {head}"
            )
        for item in [*self.gaps, *self.forks, *self.unlogged, *self.not_closed]:
            out.append(f"  {item['code']}: {item['message']}")
        return out


def scan_chains(
    leaves: Iterable[tuple[int, bytes]],
    agent_key: bytes,
    runs: Sequence[ChainRun],
    *,
    lookahead: int = LOOKAHEAD,
) -> ChainReport:
    """The chains of ``agent_key`` in the log entries ``leaves`` ((index, record digest)),
    checked against the presented ``runs`` (module docstring)."""
    prefix = genesis_prefix(agent_key)
    by_half: dict[bytes, list[tuple[int, bytes]]] = {}
    starts: dict[str, int] = {}
    for index, digest in leaves:
        head, tail = digest[:BEACON_HALF], digest[BEACON_HALF:]
        if head == prefix:
            starts.setdefault(tail.hex(), index)
        else:
            by_half.setdefault(head, []).append((index, tail))
    named = {k[0] for r in runs if (k := r.key) is not None}
    ids = sorted(starts, key=starts.__getitem__) + sorted(named - set(starts))
    chains = [_walk(cid, starts.get(cid), agent_key, by_half, lookahead) for cid in ids]
    report = ChainReport(chains=chains)
    _restarts(report, runs)
    _compare(report, runs)
    return report


def _walk(
    cid: str,
    genesis: int | None,
    agent_key: bytes,
    by_half: dict[bytes, list[tuple[int, bytes]]],
    lookahead: int,
) -> ChainState:
    key = chain_key(agent_key, cid)
    state = ChainState(id=cid, genesis_index=genesis)
    seq, misses = 0, 0
    while misses < lookahead:
        found = by_half.get(open_tag(key, seq))
        if found:
            state.opens[seq] = sorted(found)
            state.head = seq
            misses = 0
        else:
            misses += 1
        seq += 1
    return state


def _restarts(report: ChainReport, runs: Sequence[ChainRun]) -> None:
    reasons = {
        r.first.chain.id: r.first.chain.genesis
        for r in runs
        if r.first.chain is not None and r.first.chain.genesis is not None
    }
    for i, chain in enumerate(report.chains):
        chain.reason = reasons.get(chain.id)
        chain.restarted = i > 0 and chain.genesis_index is not None
        if chain.genesis_index is None:
            report.unlogged.append(
                {
                    "code": "no_genesis",
                    "chain": chain.id,
                    "message": f"chain {chain.id} has no start in the log",
                }
            )


def _compare(report: ChainReport, runs: Sequence[ChainRun]) -> None:
    presented: dict[tuple[str, int], list[ChainRun]] = {}
    for run in runs:
        if run.key is not None:
            presented.setdefault(run.key, []).append(run)
    for chain in report.chains:
        for seq, opens in sorted(chain.opens.items()):
            mine = presented.get((chain.id, seq), [])
            halves = {r.first.record_id: r.half for r in mine}
            if len(opens) > 1:
                at = ", ".join(str(i) for i, _ in opens)
                report.forks.append(
                    {
                        "code": "fork", "chain": chain.id, "seq": seq,
                        "indexes": [i for i, _ in opens],
                        "message": f"run #{seq} of chain {chain.id} was opened "
                        f"{len(opens)} times (indexes {at})",
                    }
                )  # fmt: skip
            for index, tail in opens:
                if tail not in halves.values():
                    report.gaps.append(
                        {
                            "code": "gap", "chain": chain.id, "seq": seq, "index": index,
                            "message": f"run #{seq} of chain {chain.id} was opened at index "
                            f"{index} and is not among the files",
                        }
                    )  # fmt: skip
    by_id = {c.id: c for c in report.chains}
    for (cid, seq), mine in presented.items():
        found = by_id.get(cid)
        opens = [] if found is None else found.opens.get(seq, [])
        tails = {tail for _, tail in opens}
        for run in mine:
            report.run_checks[run.first.run_id] = _run_check(report, run, found, opens, tails)


def _run_check(
    report: ChainReport,
    run: ChainRun,
    chain: ChainState | None,
    opens: list[tuple[int, bytes]],
    tails: set[bytes],
) -> Check:
    where = chain_position(run.first) or "no chain"
    link = run.first.chain
    assert link is not None
    if run.half not in tails:
        report.unlogged.append(
            {
                "code": "unlogged", "chain": link.id, "seq": link.seq, "source": run.source,
                "message": f"run {run.first.run_id} [{run.source}] says it is run #{link.seq} "
                f"of chain {link.id}, but the log has no such opening of it",
            }
        )  # fmt: skip
        return Check(name="chain", status=FAILED, message=f"{where}: opening not in the log")
    if len(opens) > 1:
        return Check(name="chain", status=FAILED, message=f"{where}: fork ({len(opens)} opens)")
    head = "?" if chain is None or chain.head is None else f"#{chain.head}"
    if not run.closed:
        report.not_closed.append(
            {
                "code": "not_closed", "chain": link.id, "seq": link.seq, "source": run.source,
                "message": f"run #{link.seq} of chain {link.id} ({run.first.run_id}) "
                "is not closed (crashed or still running)",
            }
        )  # fmt: skip
        return Check(name="chain", status=WARNING, message=f"{where} of {head}: not closed")
    if chain is not None and chain.restarted and link.seq == 0:
        return Check(name="chain", status=WARNING, message=f"{where}: chain restarted")
    gaps = _gaps_in(report, link.id)
    if gaps:
        named = "; ".join(str(g["message"]) for g in report.gaps if g["chain"] == link.id)
        return Check(
            name="chain",
            status=FAILED,
            message=f"{where} of {head}: {gaps} run(s) withheld: {named}",
        )
    return Check(name="chain", status=OK, message=f"{where} of {head}")


def _gaps_in(report: ChainReport, chain_id: str) -> int:
    counts = report.gap_counts
    if counts is None:
        counts = report.gap_counts = {}
        for gap in report.gaps:
            name = str(gap["chain"])
            counts[name] = counts.get(name, 0) + 1
    return counts.get(chain_id, 0)
