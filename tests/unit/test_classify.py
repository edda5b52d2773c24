"""The field classification (docs/formats.md "Field classification") as every record kind gets
it from ``Run``: committed by default whatever the source (derived from a result, given to
``@decision``, passed to ``emit``), kept in clear only when marked, with disclosures that open
each commitment."""

from __future__ import annotations

import pytest

from ledger.core.errors import InvalidRecordError
from ledger.records.commitments import Commitment, commit
from ledger.records.decision import (
    SCHEMA_V1,
    Candidate,
    DecisionRecord,
    MemoryWrite,
    Plan,
    Termination,
    ToolSelection,
    new_record_id,
    record_digest,
    record_fields,
    verify_disclosure,
)
from ledger_client.sdk.classify import COMMITTED, classify
from ledger_client.sdk.context import emit, ledger_run
from ledger_client.sdk.decorators import decision
from tests.agent_sink import Sink

SECRET = "Jane Roe, born 1970-01-31"


def opened(sink: Sink, record: DecisionRecord) -> dict[str, object]:
    """Each kept disclosure of ``record``, checked against it, by field path."""
    kept = sink.disclosures[record_digest(record)]
    for d in kept:
        verify_disclosure(record, d, record_digest(record))
    return {d.field_path: d.value for d in kept}


def test_reasons_plan_steps_and_candidates_are_committed_by_default() -> None:
    @decision("termination")
    def stop() -> str:
        return SECRET

    @decision("plan")
    def plan() -> list[str]:
        return [SECRET, "answer"]

    @decision("termination", reason=SECRET)
    def given() -> None:
        return None

    sink = Sink()
    with ledger_run(sink, agent="a"):
        stop()
        plan()
        given()
        emit(Termination(reason=SECRET))
        emit(ToolSelection(), candidates=(Candidate(id="c", action=SECRET, score="1", rank=1),))
        emit(MemoryWrite(key="k", value=SECRET, source="s", trust_label="t"))
    for record in sink.records[:-1]:
        assert SECRET not in record.to_json(), record.kind
        assert SECRET in opened(sink, record).values() or SECRET in str(opened(sink, record))
    stop_record, plan_record = sink.records[:2]
    assert isinstance(stop_record.payload, Termination)
    assert isinstance(stop_record.payload.reason, Commitment)
    assert isinstance(plan_record.payload, Plan)
    assert all(isinstance(s, Commitment) for s in plan_record.payload.steps)
    assert opened(sink, plan_record)["payload.steps[1]"] == "answer"


def test_marked_fields_stay_in_clear() -> None:
    @decision("termination", clear=("payload.reason",))
    def stop() -> str:
        return "budget exhausted"

    @decision("tool_call", clear=("parameters.city",))
    def weather(city: str, user: str) -> str:
        return "rain"

    @decision("plan", capture="content")
    def plan() -> list[str]:
        return ["look up", "answer"]

    sink = Sink()
    with ledger_run(sink, agent="a"):
        stop()
        weather("Paris", SECRET)
        plan()
        emit(Plan(steps=("one",)), clear=("payload.steps",))
    stopped, called, planned, emitted, _ = sink.records
    assert stopped.payload == Termination(reason="budget exhausted")
    assert called.parameters["city"] == "Paris"
    assert isinstance(called.parameters["user"], Commitment) and SECRET not in called.to_json()
    assert planned.payload == Plan(steps=("look up", "answer"))
    assert emitted.payload == Plan(steps=("one",))
    with pytest.raises(ValueError, match=r"clear='payload\.nope'"):
        decision("termination", clear=("payload.nope",))


def test_failures_and_run_errors_keep_their_status_in_clear() -> None:
    @decision("tool_call")
    def broken(secret: str) -> None:
        raise KeyError(secret)

    sink = Sink()
    with pytest.raises(KeyError), ledger_run(sink, agent="a"):
        broken(SECRET)
    failed, run_error, _ = sink.records
    assert failed.actual_outcome == {
        "error": "KeyError",
        "decision": "tool_call",
        "name": broken.__qualname__,
    }
    assert run_error.actual_outcome == {"error": "KeyError"}
    assert SECRET not in failed.to_json() + run_error.to_json()


def test_classify_covers_every_committed_name_and_leaves_commitments_alone() -> None:
    already, _ = commit("x")
    payload, fields, kept = classify(
        Termination(reason=already), {"actual_outcome": None, "parameters": {"a": already}}
    )
    assert payload == Termination(reason=already) and kept == []
    assert fields == {"actual_outcome": None, "parameters": {"a": already}}
    assert set(COMMITTED) == {
        "payload.reason", "payload.steps", "candidates", "parameters", "expected_outcome",
        "actual_outcome", "payload.value",
    }  # fmt: skip


def test_a_committed_reason_needs_schema_v2() -> None:
    reason, _ = commit(SECRET)
    common = {
        "record_id": new_record_id(),
        "run_id": "r",
        "step": 0,
        "time": "2026-12-01T00:00:00Z",
        "agent": "a",
    }
    v2 = DecisionRecord(payload=Termination(reason=reason), **common)  # type: ignore[arg-type]
    assert DecisionRecord.from_json(v2.to_json()) == v2
    obj = {**v2.to_json_obj(), "schema": SCHEMA_V1}
    for name in set(obj) - set(record_fields(1)):  # the members added after v1
        del obj[name]
    with pytest.raises(InvalidRecordError, match=r"^payload.reason: a committed reason needs"):
        DecisionRecord.from_json_obj(obj)
