"""Lineage over random parent graphs: descendants and ancestors are inverse relations, every
record on a path is verified, and a dangling parent is always reported."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.records.decision import DecisionRecord, record_digest
from ledger.records.runs import run_closed_record, run_steps
from ledger_client.audit.lineage import Lineage
from ledger_client.receipts.run_verify import RunItem
from ledger_client.receipts.verify import ReceiptChecker
from tests.receipt_world import World, make_record

RUN = "run-lineage"
DANGLING = "ee" * 32


@st.composite
def graphs(draw: st.DrawFn) -> list[list[int]]:
    """Parents (indexes of earlier records) for each of 1..8 records; -1 is a dangling one."""
    n = draw(st.integers(1, 8))
    return [
        draw(st.lists(st.integers(-1, i - 1), max_size=3, unique=True)) if i else []
        for i in range(n)
    ]


def build(parents: list[list[int]]) -> tuple[list[DecisionRecord], Lineage]:
    body: list[DecisionRecord] = []
    for step, named in enumerate(parents):
        digests = [DANGLING if p < 0 else record_digest(body[p]).hex() for p in named]
        body.append(make_record(step, run=RUN, parents=digests))
    records = [
        *body,
        run_closed_record(RUN, run_steps(body), agent="agent-r", time="2025-06-15T15:06:40Z"),
    ]
    world = World([record_digest(r) for r in records])
    items = [
        RunItem(source=f"{i}", record=r, receipt=world.receipt(i, len(records), anchored=False))
        for i, r in enumerate(records)
    ]
    return body, Lineage([("run.jsonl", items)], ReceiptChecker([world.key]))


@settings(max_examples=30, deadline=None)
@given(graphs())
def test_descendants_and_ancestors_are_inverse(parents: list[list[int]]) -> None:
    body, graph = build(parents)
    digests = [record_digest(r).hex() for r in body]
    down = {d: {n.check.digest for n in graph.walk([d], "descendants").nodes} for d in digests}
    up = {d: graph.walk([d], "ancestors") for d in digests}
    for a in digests:
        ancestors = {n.check.digest for n in up[a].nodes}
        for b in digests:
            assert (a in down[b]) == (b in ancestors)
        assert all(n.verified for n in up[a].nodes)
        dangling = {p for _, p in up[a].unknown_parents}
        expected = (
            {DANGLING}
            if any(DANGLING in body[digests.index(x)].parent_digests for x in ancestors)
            else set()
        )
        assert dangling == expected
