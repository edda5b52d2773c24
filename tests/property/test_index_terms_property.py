"""Hypothesis: the index's record terms (``audit.index.record_terms``, which skips the walks
that find nothing) are the terms of the plain definition: one walk over parameters, candidate
actions, outcomes and a payload's ``value``, and the payload's ``steps`` for commitments."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.records.commitments import Commitment
from ledger.records.decision import (
    Candidate,
    ConstraintCheck,
    DecisionRecord,
    MemoryWrite,
    Outcome,
    ParameterConstruction,
    Payload,
    Plan,
    RunClosed,
    RunStep,
    Termination,
    ToolCall,
    ToolSelection,
    new_record_id,
)
from ledger_client.audit import index
from ledger_client.audit.decision import plain_strings, tags_of

hex32 = st.binary(min_size=32, max_size=32).map(bytes.hex)
names = st.text(min_size=1, max_size=10)
commitments = st.binary(min_size=32, max_size=32).map(Commitment)
scalars = st.none() | st.booleans() | st.integers(-1000, 1000) | st.floats(-1e6, 1e6) | names
values = st.recursive(
    scalars | commitments,
    lambda kids: (
        st.lists(kids, max_size=3)
        | st.dictionaries(names, kids, max_size=3).filter(lambda d: set(d) != {"commitment"})
    ),
    max_leaves=6,
)
digests = st.lists(hex32, unique=True, max_size=3).map(tuple)
payloads: st.SearchStrategy[Payload] = st.one_of(
    st.just(ToolSelection()),
    st.builds(ParameterConstruction, tool=names),
    st.builds(ToolCall, tool=names, inputs_used=digests, outputs_generated=digests),
    st.builds(Termination, reason=names),
    st.builds(MemoryWrite, key=names, value=values, source=names, trust_label=names),
    st.builds(ConstraintCheck, constraint_id=names, passed=st.booleans()),
    st.builds(Plan, steps=st.lists(names | commitments, min_size=1, max_size=3).map(tuple)),
    st.just(Outcome()),
    st.builds(
        RunClosed,
        steps=st.lists(hex32, max_size=3).map(
            lambda ds: tuple(RunStep(step=i, record_digest=d) for i, d in enumerate(ds))
        ),
    ),
)


@st.composite
def records(draw: st.DrawFn) -> DecisionRecord:
    payload = draw(payloads)
    actions = draw(st.lists(names | commitments, max_size=3))
    if isinstance(payload, ToolSelection) and not actions:
        actions = ["only"]
    candidates = tuple(
        Candidate(id=f"c{i}", action=a, score="0.5", rank=i + 1) for i, a in enumerate(actions)
    )
    parameters = draw(st.dictionaries(names, values, max_size=3))
    if draw(st.booleans()):
        parameters["tags"] = draw(st.lists(names | st.integers(-9, 9), max_size=3))
    return DecisionRecord(
        record_id=new_record_id(0, bytes(10)),
        run_id="run",
        step=draw(st.integers(100, 200)),
        time="2026-01-01T00:00:00Z",
        agent="agent",
        payload=payload,
        parent_digests=draw(digests),
        model=draw(st.none() | names),
        evidence=draw(st.dictionaries(names, hex32, max_size=2)),
        candidates=candidates,
        parameters={k: v for k, v in parameters.items() if k != "commitment"},
        expected_outcome=draw(values),
        actual_outcome=draw(values),
        model_parameters=draw(st.dictionaries(names, scalars, max_size=2)),
    )


def plain_terms(record: DecisionRecord, digest: str) -> list[tuple[str, str]]:
    """The definition of a record's terms, walking every value whatever it holds."""
    payload: Any = record.payload
    out = [("record", digest)]
    out += [("parent", p) for p in record.parent_digests]
    out += [("evidence", d) for d in record.evidence.values()]
    out += [("input", d) for d in getattr(payload, "inputs_used", ())]
    out += [("output", d) for d in getattr(payload, "outputs_generated", ())]
    walked = (
        record.parameters, [c.action for c in record.candidates], record.expected_outcome,
        record.actual_outcome, getattr(payload, "value", None),
    )  # fmt: skip
    found = [*index._commitments(walked), *index._commitments(getattr(payload, "steps", None))]
    out += [("commitment", c) for c in found]
    for name, value in [*record.parameters.items(), *record.model_parameters.items()]:
        if isinstance(value, str):
            out.append(("param", f"{name}={value}"))
        elif isinstance(value, bool | int | float):
            out.append(("param", f"{name}={json.dumps(value)}"))
    out += [("tag", t) for t in tags_of(record)]
    if record.model:
        out.append(("model", record.model))
    texts = plain_strings(walked)
    out += [("content", index.content_digest(t)) for t in texts if len(t) >= 8]
    for whole in (record.actual_outcome, record.expected_outcome):
        if whole is not None and not isinstance(whole, str) and not index._has_commitment(whole):
            out.append(("content", index.content_digest(whole)))
    return out


@settings(max_examples=400, deadline=None)
@given(records(), hex32)
def test_record_terms_are_the_plain_definition(record: DecisionRecord, digest: str) -> None:
    assert index.record_terms(record, digest) == plain_terms(record, digest)
    # the rows stored in ``terms``: the same, less the kinds a ``records`` column holds
    kept = [t for t in plain_terms(record, digest) if t[0] not in index.COLUMN_KINDS]
    assert index.record_terms(record, digest, stored=True) == kept
