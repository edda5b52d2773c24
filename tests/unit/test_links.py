"""Data-flow lineage in the SDK, commitments by default, private disclosures, OTel span ids and
the LangChain handler's warning, with an in-memory sink (no log)."""

from __future__ import annotations

import json
import stat
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ledger.records.commitments import Kept
from ledger.records.decision import (
    MemoryWrite,
    Outcome,
    RunClosed,
    record_digest,
    verify_disclosure,
)
from ledger.records.runs import check_run
from ledger_client.receipts.disclose import load_private_disclosures
from ledger_client.sdk.context import emit, ledger_run
from ledger_client.sdk.decorators import UnrecordedDecisionWarning, decision
from ledger_client.sdk.links import ValueLinks, parent_digest
from tests.agent_sink import Sink


@decision("tool_call")
def fetch(url: str) -> str:
    return f"page of {url}"


@decision("memory_write", trust_label="untrusted", source="web")
def remember(page: str) -> str:
    return page.upper()


@decision("memory_write", trust_label="trusted", source="db")
def policy() -> str:
    return "limit 100"


@decision("parameter_construction", tool="refund")
def plan(note: str, amount: int) -> dict[str, Any]:
    return {"amount": amount, "note": note[:4]}


@decision("tool_call")
def act(params: dict[str, Any], rule: str = "") -> str:
    return "done"


def test_parents_follow_data_flow_not_step_order() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a"):
        note = remember(fetch("https://x.example"))
        rule = policy()
        act(plan(note, 5))
        act({"fresh": True}, rule)
    f, m, p, pl, a1, a2, closed = sink.records
    assert f.parent_digests == () and m.parent_digests == (sink.hex(f),)
    assert p.parent_digests == ()  # the policy read does not rest on the web page
    assert pl.parent_digests == (sink.hex(m),)
    assert a1.parent_digests == (sink.hex(pl),)
    assert a2.parent_digests == ()  # "limit 100": a short string, identity says nothing
    assert set(closed.parent_digests) == {sink.hex(p), sink.hex(a1), sink.hex(a2)}  # sinks
    assert [r.step for r in sink.records] == list(range(7))  # step order unchanged
    assert check_run(sink.records).ok


def test_explicit_parents_on_the_decorator_and_emit() -> None:
    sink = Sink()

    @decision("outcome", parents=lambda args: [args["source"]])
    def judge(source: str, verdict: str) -> str:
        return verdict

    with ledger_run(sink, agent="a") as run:
        fetch("u")
        first = run.entries[-1]
        judge(first.digest.hex(), "ok")
        emit(Outcome(), parents=[first, first.digest], actual_outcome="seen")
        emit(Outcome(), actual_outcome="chained")  # no parents=: the frame's frontier
    f, j, e1, e2, _ = sink.records
    assert j.parent_digests == (sink.hex(f),)
    assert e1.parent_digests == (sink.hex(f),)  # the record and its value name one parent
    assert e2.parent_digests == (sink.hex(e1),)


def test_cross_run_parents_are_external_not_missing() -> None:
    first, second = Sink(), Sink()
    with ledger_run(first, agent="a") as run:
        fetch("u")
        logged = run.entries[-1]
    with ledger_run(second, agent="b"):
        emit(Outcome(), parents=[logged.record], actual_outcome="reviewed")
    outcome = second.records[0]
    assert outcome.parent_digests == (logged.digest.hex(),)
    report = check_run(second.records)
    assert report.ok and report.external_parents == (logged.digest.hex(),)
    # a parent that the run lists but lacks is still missing
    assert check_run(first.records[1:]).problems


def test_parent_forms_and_errors() -> None:
    links = ValueLinks()
    value = ["v"]
    links.track(value, "ab" * 32)
    links.track(3, "cd" * 32)  # numbers are not tracked
    assert parent_digest(value, links) == "ab" * 32
    assert links.digest_of(3) is None
    assert parent_digest(b"\x01" * 32) == "01" * 32
    with pytest.raises(TypeError, match="names no record"):
        parent_digest("not a digest")
    with pytest.raises(TypeError, match="names no record"):
        parent_digest(["untracked"], links)
    with pytest.raises(ValueError, match="links="):
        ledger_run(Sink(), agent="a", links="graph")


def test_sequence_links_keep_the_step_chain() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a", links="sequence"):
        remember(fetch("u"))
        policy()
    _, m, p, closed = sink.records
    assert p.parent_digests == (sink.hex(m),)
    assert closed.parent_digests == (sink.hex(p),)


def test_commit_is_the_default_capture() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a") as run:
        fetch("https://secret.example/a")
    record = sink.records[0]
    assert "secret" not in record.to_json() and record.evidence == {}
    assert set(record.parameters) == {"url"}
    kept = run.entries[0].disclosures
    assert [d.field_path for d in kept] == ["parameters.url", "actual_outcome"]
    for d in kept:
        verify_disclosure(record, d, record_digest(record))
    memory = Sink()
    with ledger_run(memory, agent="a"):
        remember("x")
    payload = memory.records[0].payload
    assert isinstance(payload, MemoryWrite) and not isinstance(payload.value, str)


class ReceiptSink(Sink):
    """A sink whose receipts are stand-ins carrying the disclosures asked for."""

    def receipts(self, digests: Sequence[bytes], *, timeout: float = 30.0) -> Any:
        return [_FakeReceipt() for _ in digests]


@dataclass(frozen=True)
class _FakeReceipt:
    record: Any = None
    disclosures: tuple[Kept, ...] = ()

    def to_json_obj(self) -> dict[str, Any]:
        return {"disclosures": [d.to_json_obj() for d in self.disclosures]}


def test_disclosures_stay_in_the_private_file_unless_asked(tmp_path: Path) -> None:
    sink = ReceiptSink()
    receipts = tmp_path / "run.jsonl"
    with ledger_run(sink, agent="a", receipts=receipts, disclose=["parameters.url"]):
        fetch("https://x.example")
        policy()
    private = tmp_path / "run.disclosures.jsonl"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    kept = load_private_disclosures(private)
    assert {d.field_path for ds in kept.values() for d in ds} == {
        "parameters.url", "actual_outcome", "payload.value",
    }  # fmt: skip
    shared = [json.loads(line) for line in receipts.read_text().splitlines()]
    opened = [d["field_path"] for line in shared for d in line["receipt"]["disclosures"]]
    assert opened == ["parameters.url"]  # exactly the path asked for
    assert "page of" not in receipts.read_text()
    assert isinstance(sink.records[-1].payload, RunClosed)


def test_decision_records_the_active_otel_span() -> None:
    trace = pytest.importorskip("opentelemetry.trace")
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    tracer = sdk_trace.TracerProvider().get_tracer("t")
    sink = Sink()
    with ledger_run(sink, agent="a"):
        with tracer.start_as_current_span("agent-step") as span:
            fetch("u")
        fetch("v")  # no span: no otel
    ctx = span.get_span_context()
    assert sink.records[0].otel is not None
    assert sink.records[0].otel.trace_id == f"{ctx.trace_id:032x}"
    assert sink.records[0].otel.span_id == f"{ctx.span_id:016x}"
    assert sink.records[1].otel is None
    assert trace.get_current_span().get_span_context().is_valid is False


def test_langchain_handler_warns_once_when_no_run_is_open() -> None:
    pytest.importorskip("langchain_core")
    from uuid import uuid4

    from ledger_client.bridges.langchain import LedgerCallbackHandler

    handler = LedgerCallbackHandler()
    with pytest.warns(UnrecordedDecisionWarning, match="no ledger run is open") as caught:
        handler.on_tool_start({"name": "search"}, "q", run_id=uuid4())
        handler.on_tool_start({"name": "search"}, "q", run_id=uuid4())
        handler.on_custom_event("ledger.memory_write", {"key": "k", "value": 1}, run_id=uuid4())
    assert len([w for w in caught if issubclass(w.category, UnrecordedDecisionWarning)]) == 1
    sink = Sink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ledger_run(sink, agent="a"):
            quiet = LedgerCallbackHandler()
            run_id = uuid4()
            quiet.on_tool_start({"name": "search"}, "q", run_id=run_id)
            quiet.on_tool_end("r", run_id=run_id)
    assert [r.kind for r in sink.records] == ["tool_call", "run_closed"]
