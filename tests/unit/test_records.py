"""Decision records v1: RFC 8785 vectors, UUIDv7 layout, commitments, schema, run checks.

Vectors are literals from RFC 8785 (§3.2.2 sample, §3.2.3 sort order, Appendix B numbers) and
RFC 9562 (Appendix A.6 UUIDv7). The published JSON Schema file is checked against the module's
constants and, through a small draft 2020-12 evaluator below, against the Python validator.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import re
import struct
import sys
from collections.abc import Callable
from importlib import resources
from typing import Any

import pytest

from ledger.core import jcs
from ledger.core.errors import (
    InvalidRecordError,
    MalformedHashError,
    RecordError,
    UnsupportedSchemaError,
)
from ledger.records import commitments, runs
from ledger.records import decision as records
from ledger.records.commitments import SALT_BYTES, Commitment, Disclosure, commit, commitment_digest
from ledger.records.decision import (
    CANDIDATE_FIELDS,
    KINDS,
    OTEL_FIELDS,
    PAYLOAD_FIELDS,
    RECORD_FIELDS,
    RUN_STEP_FIELDS,
    SCHEMA_V1,
    Candidate,
    ConstraintCheck,
    Cost,
    DecisionRecord,
    Handoff,
    MemoryWrite,
    OtelContext,
    Outcome,
    ParameterConstruction,
    Payload,
    Plan,
    RunClosed,
    Termination,
    ToolCall,
    ToolSelection,
    Usage,
    new_record_id,
    record_digest,
    uuid7_time_ms,
    verify_disclosure,
)
from ledger.records.runs import PROBLEM_CODES, RunReport, check_run, run_closed_record, run_steps
from tests import processes
from tests.json_schema import schema_errors

T0 = 1_700_000_000_000
TIME = "2025-06-01T12:00:00.250Z"
D1, D2, D3 = "11" * 32, "22" * 32, "33" * 32
SALT = bytes(range(16))


def rid(n: int) -> str:
    return new_record_id(now_ms=T0 + n, rand=n.to_bytes(10, "big"))


def make(payload: Payload, *, step: int = 0, run: str = "run-1", **extra: Any) -> DecisionRecord:
    extra.setdefault("record_id", rid(step if isinstance(step, int) else 0))
    extra.setdefault("time", TIME)
    return DecisionRecord(run_id=run, step=step, agent="agent-a", payload=payload, **extra)


def full_record() -> DecisionRecord:
    """A tool_selection record with every optional field filled."""
    secret, _ = commit("the user's address", SALT)
    return make(
        ToolSelection(),
        step=3,
        parent_digests=(D1, D2),
        model="model-x",
        otel=OtelContext(trace_id="4bf92f3577b34da6a3ce929d0e0e4736", span_id="00f067aa0ba902b7"),
        evidence={"prompt": D1, "context": D2},
        candidates=(
            Candidate(id="search", action="web.search", score="0.87", rank=1),
            Candidate(id="mail", action=secret, score="-1.5", rank=2),
        ),
        selected="search",
        parameters={"query": "weather", "limit": 5, "nested": {"a": [1, 2.5, None, True]}},
        constraints=("no-pii", "budget"),
        expected_outcome={"results": 5},
        actual_outcome=None,
        started_at="2025-06-01T11:59:59.500Z",
        ended_at="2025-06-01T14:00:00.100+02:00",
        usage=Usage(input_tokens=812, output_tokens=64, total_tokens=876),
        cost=Cost(amount="0.0042", currency="USD"),
        model_parameters={"temperature": 0.2, "max_tokens": 256, "stop": ["\n\n"]},
    )


def one_of_each_kind() -> list[DecisionRecord]:
    c, _ = commit({"note": "x"}, SALT)
    payloads: list[Payload] = [
        ToolSelection(),
        ParameterConstruction(tool="web.search"),
        ToolCall(tool="web.search", inputs_used=(D1,), outputs_generated=(D2, D3)),
        Termination(reason="goal reached"),
        MemoryWrite(key="user.pref", value=c, source="tool:web.search", trust_label="untrusted"),
        ConstraintCheck(constraint_id="no-pii", passed=False),
        Plan(steps=("look up", c)),
        Handoff(to_agent="agent-b"),
        Outcome(),
        RunClosed(steps=()),
    ]
    cands = (Candidate(id="a", action="act", score="1", rank=1),)
    return [
        make(p, step=i, candidates=cands if isinstance(p, ToolSelection) else ())
        for i, p in enumerate(payloads)
    ]


# --- RFC 8785 -------------------------------------------------------------------------------------

RFC8785_3_2_2_INPUT = r"""{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"""
RFC8785_3_2_2_OUTPUT = (
    r"""{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"""
    + '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
)
RFC8785_3_2_3_INPUT = r"""{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"""
RFC8785_3_2_3_ORDER = [
    "Carriage Return",
    "One",
    "Control",
    "Latin Small Letter O With Diaeresis",
    "Euro Sign",
    "Emoji: Grinning Face",
    "Hebrew Letter Dalet With Dagesh",
]
# RFC 8785 Appendix B: IEEE 754 bit pattern -> ECMAScript serialisation.
RFC8785_APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]
RFC8785_APPENDIX_B_INVALID = ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"]


def from_bits(bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(bits))[0]
    return value


def test_rfc8785_section_3_2_2_sample() -> None:
    out = jcs.canonical_bytes(jcs.loads_strict(RFC8785_3_2_2_INPUT))
    assert out.decode("utf-8") == RFC8785_3_2_2_OUTPUT
    assert out.startswith(bytes.fromhex("7b226c69746572616c73223a5b6e756c6c2c74727565"))


def test_rfc8785_section_3_2_3_sort_order() -> None:
    out = jcs.canonical_bytes(jcs.loads_strict(RFC8785_3_2_3_INPUT)).decode("utf-8")
    assert list(json.loads(out).values()) == RFC8785_3_2_3_ORDER
    assert out.startswith('{"\\r":"Carriage Return","1":"One","\u0080":"Control"')


@pytest.mark.parametrize(("bits", "expected"), RFC8785_APPENDIX_B)
def test_rfc8785_appendix_b_numbers(bits: str, expected: str) -> None:
    assert jcs.canonical_bytes(from_bits(bits)) == expected.encode()


@pytest.mark.parametrize("bits", RFC8785_APPENDIX_B_INVALID)
def test_rfc8785_appendix_b_nan_and_infinity_rejected(bits: str) -> None:
    with pytest.raises(InvalidRecordError, match="NaN/Infinity"):
        jcs.canonical_bytes({"n": [from_bits(bits)]})


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"a": [1, float("nan")]}, "a[1]"),
        ({"a": {"b": float("inf")}}, "a.b"),
        ({"big": 2**53}, "big"),
        ({"small": -(2**53)}, "small"),
        ({"a": {1: "x"}}, "a"),
        ({"s": "\ud800"}, "s"),
        ({"odd key": {0.5}}, '["odd key"]'),
        (b"bytes", "$"),
    ],
)
def test_canonical_bytes_refuses_non_i_json(value: object, field: str) -> None:
    with pytest.raises(InvalidRecordError) as info:
        jcs.canonical_bytes(value)
    assert info.value.field == field


def test_canonical_bytes_limits_are_inclusive() -> None:
    limit = 2**53 - 1
    assert jcs.canonical_bytes([limit, -limit]) == b"[9007199254740991,-9007199254740991]"
    assert (
        jcs.canonical_bytes((1, "\u00e9", {"b": 1, "a": 2}))
        == '[1,"\u00e9",{"a":2,"b":1}]'.encode()
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',
        '{"a": NaN}',
        "[Infinity]",
        "[9007199254740992]",
        '["\\ud800"]',
        b'"\xff"',
        "{",
        "[1e400]",
    ],
)
def test_loads_strict_refuses(text: str | bytes) -> None:
    with pytest.raises(InvalidRecordError):
        jcs.loads_strict(text)


@pytest.mark.parametrize(
    ("parts", "path"),
    [
        (["a"], "a"),
        (["a", 1, "b"], "a[1].b"),
        (["a.b", 0], '["a.b"][0]'),
        ([0, "", 'q"x'], '[0][""]["q\\"x"]'),
        (["candidates", 1, "score"], "candidates[1].score"),
    ],
)
def test_field_paths_round_trip(parts: list[str | int], path: str) -> None:
    built = ""
    for part in parts:
        built = (
            jcs.index_path(built, part) if isinstance(part, int) else jcs.child_path(built, part)
        )
    assert built == path
    assert jcs.parse_path(path) == parts


@pytest.mark.parametrize("path", ["a..b", ".a", "a[", "a[x]", "a[1", "1a", 'a["b"'])
def test_bad_field_paths(path: str) -> None:
    with pytest.raises(InvalidRecordError):
        jcs.parse_path(path)


# --- UUIDv7 ---------------------------------------------------------------------------------------


def test_uuid7_rfc9562_appendix_a6_vector() -> None:
    # unix_ts_ms 0x017F22E279B0, rand_a 0xCC3, rand_b 0x18C4DC0C0C07398F
    value = new_record_id(now_ms=0x017F22E279B0, rand=bytes.fromhex("0cc318c4dc0c0c07398f"))
    assert value == "017f22e2-79b0-7cc3-98c4-dc0c0c07398f"
    assert uuid7_time_ms(value) == 1645557742000


@pytest.mark.parametrize("fill", [0x00, 0xFF, 0x5A])
def test_uuid7_layout(fill: int) -> None:
    value = new_record_id(now_ms=T0, rand=bytes([fill]) * 10)
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", value
    )
    raw = bytes.fromhex(value.replace("-", ""))
    assert raw[6] >> 4 == 7 and raw[8] >> 6 == 0b10
    assert int.from_bytes(raw[:6], "big") == T0
    assert raw[6] & 0x0F == fill & 0x0F and raw[9:] == bytes([fill]) * 7


def test_uuid7_defaults_to_clock_and_randomness() -> None:
    a, b = new_record_id(), new_record_id()
    assert a != b
    assert abs(uuid7_time_ms(a) - uuid7_time_ms(b)) < 60_000
    assert new_record_id(now_ms=1) < new_record_id(now_ms=2)


@pytest.mark.parametrize(("now_ms", "rand"), [(-1, None), (2**48, None), (0, b"short")])
def test_uuid7_refuses_bad_inputs(now_ms: int, rand: bytes | None) -> None:
    with pytest.raises(InvalidRecordError):
        new_record_id(now_ms=now_ms, rand=rand)


# --- commitments and disclosure -------------------------------------------------------------------


def disclosed_record() -> tuple[DecisionRecord, dict[str, Disclosure]]:
    c_query, d_query = commit("home address", field_path="parameters.query")
    c_deep, d_deep = commit({"k": [1, "v"]}, field_path="parameters.nested.x[1]")
    c_action, d_action = commit("send mail to bob", field_path="candidates[0].action")
    c_out, d_out = commit(42, field_path="actual_outcome")
    record = make(
        ToolSelection(),
        candidates=(Candidate(id="a", action=c_action, score="0.5", rank=1),),
        parameters={"query": c_query, "plain": "x", "nested": {"x": [0, c_deep]}},
        actual_outcome=c_out,
    )
    return record, {"query": d_query, "deep": d_deep, "action": d_action, "out": d_out}


def test_commitment_is_sha256_of_salt_and_canonical_value() -> None:
    c, d = commit({"b": 1, "a": "\u20ac"}, SALT)
    expected = jcs.canonical_bytes({"a": "\u20ac", "b": 1})
    assert c.digest == hashlib.sha256(SALT + expected).digest()
    assert c.to_json_obj() == {"commitment": "sha256:" + c.digest.hex()}
    assert d.commitment() == c and commitment_digest({"a": "\u20ac", "b": 1}, SALT) == c.digest
    assert len(commit("x")[1].salt) == SALT_BYTES
    assert commit("x")[0] != commit("x")[0]  # fresh salts


@pytest.mark.parametrize("form", ["record", "obj", "text", "bytes"])
def test_disclosure_verifies(form: str) -> None:
    record, disclosures = disclosed_record()
    forms: dict[str, DecisionRecord | dict[str, jcs.Json] | str | bytes] = {
        "record": record,
        "obj": record.to_json_obj(),
        "text": record.to_json(),
        "bytes": record.to_json().encode(),
    }
    given = forms[form]
    for disclosure in disclosures.values():
        verify_disclosure(given, disclosure, record_digest(record))


def test_disclosure_with_wrong_value_salt_or_field_is_rejected() -> None:
    record, ds = disclosed_record()
    digest = record_digest(record)
    query = ds["query"]
    cases = [
        Disclosure(query.field_path, "other address", query.salt),
        Disclosure(query.field_path, query.value, bytes(16)),
        query.at("candidates[0].action"),
        query.at("parameters.plain"),
        query.at("parameters.missing"),
        query.at("parameters.nested.x[7]"),
        ds["out"].at("actual_outcome.x"),
        Disclosure("actual_outcome", 42.5, ds["out"].salt),
    ]
    for bad in cases:
        with pytest.raises(RecordError):
            verify_disclosure(record, bad, digest)


def test_disclosure_against_the_wrong_record_digest_is_rejected() -> None:
    record, ds = disclosed_record()
    other = make(Outcome(), actual_outcome=record.actual_outcome)
    with pytest.raises(RecordError, match="does not match expected"):
        verify_disclosure(other, ds["out"], record_digest(record))
    with pytest.raises(MalformedHashError):
        verify_disclosure(record, ds["out"], b"\x00" * 31)


def test_disclosure_round_trip_and_salt_rules() -> None:
    _, ds = disclosed_record()
    for d in ds.values():
        assert Disclosure.from_json(d.to_json()) == d
        assert Disclosure.from_json_obj(d.to_json_obj()) == d
    with pytest.raises(InvalidRecordError, match="salt"):
        commit("x", bytes(17))  # a fixed salt length keeps the commitment binding
    with pytest.raises(InvalidRecordError, match="salt"):
        commit("x", bytes(15))
    with pytest.raises(InvalidRecordError):
        Disclosure.from_json('{"field_path": "a", "salt": "zz", "value": 1}')
    with pytest.raises(InvalidRecordError):
        Disclosure("a..b", 1, SALT)
    with pytest.raises(InvalidRecordError):
        Commitment(b"short")


# --- records: round trips and digests -------------------------------------------------------------


@pytest.mark.parametrize("record", [full_record(), *one_of_each_kind()], ids=lambda r: r.kind)
def test_round_trips(record: DecisionRecord) -> None:
    assert DecisionRecord.from_json(record.to_json()) == record
    assert DecisionRecord.from_json_obj(record.to_json_obj()) == record
    assert DecisionRecord.from_json(record.to_json().encode()) == record
    assert record.to_json().encode() == jcs.canonical_bytes(json.loads(record.to_json()))
    assert DecisionRecord.from_json(record.to_json()).to_json() == record.to_json()
    assert set(record.to_json_obj()) == set(RECORD_FIELDS)
    assert record.to_json_obj()["kind"] == record.kind


@pytest.mark.parametrize("record", [full_record(), *one_of_each_kind()], ids=lambda r: r.kind)
def test_the_fast_reading_reads_every_kind_as_the_plain_one(record: DecisionRecord) -> None:
    """The usual records take the fast path (tests/property: it reads what the plain one does,
    refusing the rest to it), and it gives the same members, types included."""
    plain = jcs.loads_strict(record.to_json(), safe_numbers=True)
    fast = records._parse_record_fast(plain)
    assert fast is not None
    assert repr(sorted(fast.items())) == repr(sorted(records._parse_record(plain).items()))


def test_record_digest_is_sha256_of_canonical_json() -> None:
    record = full_record()
    digest = record_digest(record)
    assert len(digest) == 32
    assert digest == hashlib.sha256(record.to_json().encode()).digest()
    shuffled = dict(reversed(list(record.to_json_obj().items())))
    assert record_digest(DecisionRecord.from_json_obj(shuffled)) == digest


def test_construction_normalises() -> None:
    c, _ = commit("v", SALT)
    record = make(
        ToolSelection(),
        parent_digests=[D1],
        candidates=[Candidate(id="a", action="x", score="0", rank=1)],
        parameters={"k": c.to_json_obj(), "t": (1, 2)},
    )
    assert record.parent_digests == (D1,)
    assert isinstance(record.candidates, tuple)
    assert record.parameters == {"k": c, "t": [1, 2]}
    assert DecisionRecord.from_json(record.to_json()) == record


def test_every_top_level_field_changes_the_digest() -> None:
    base = full_record()
    obj = base.to_json_obj()
    changes: dict[str, Any] = {
        "record_id": rid(99),
        "run_id": "run-2",
        "step": 4,
        "parent_digests": [D1],
        "time": "2025-06-01T12:00:00.251Z",
        "agent": "agent-b",
        "model": None,
        "otel": None,
        "evidence": {"prompt": D1},
        "candidates": [base.candidates[0].to_json_obj()],
        "selected": None,
        "parameters": {},
        "constraints": ["budget", "no-pii"],
        "expected_outcome": {"results": 6},
        "actual_outcome": 0,
        "started_at": None,
        "ended_at": "2025-06-01T12:00:01Z",
        "usage": {"input_tokens": 812, "output_tokens": None, "total_tokens": 876},
        "cost": {"amount": "0.0043", "currency": "USD"},
        "model_parameters": {"temperature": 0.3},
        "signature": {"key": "agent-a", "key_id": "0a0b0c0d", "sig": "A" * 86 + "=="},
    }
    # chain: only on step 0 (test_agent_chain.py changes it there)
    assert set(changes) | {"schema", "kind", "payload", "chain"} == set(RECORD_FIELDS)
    digests = {record_digest(base)}
    for name, value in changes.items():
        digests.add(record_digest(DecisionRecord.from_json_obj({**obj, name: value})))
    assert len(digests) == len(changes) + 1


# --- records: invalid input is refused, naming the field ------------------------------------------


def mutated(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    obj = copy.deepcopy(full_record().to_json_obj())
    change(obj)
    return obj


def _set(path: list[str | int], value: object) -> Callable[[dict[str, Any]], object]:
    def apply(obj: dict[str, Any]) -> None:
        node: Any = obj
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return apply


INVALID: list[tuple[str, Callable[[dict[str, Any]], object]]] = [
    ("schema", _set(["schema"], "ledger.decision/2")),
    ("record_id", _set(["record_id"], "017f22e2-79b0-4cc3-98c4-dc0c0c07398f")),
    ("record_id", _set(["record_id"], "017F22E2-79B0-7CC3-98C4-DC0C0C07398F")),
    ("run_id", _set(["run_id"], 5)),
    ("run_id", _set(["run_id"], "")),
    ("step", _set(["step"], "3")),
    ("step", _set(["step"], True)),
    ("step", _set(["step"], -1)),
    ("step", _set(["step"], 2.5)),
    ("step", _set(["step"], 2**53)),
    ("parent_digests", _set(["parent_digests"], D1)),
    ("parent_digests[1]", _set(["parent_digests", 1], "AB" * 32)),
    ("parent_digests[1]", _set(["parent_digests", 1], D1)),
    ("kind", _set(["kind"], "daydream")),
    ("kind", _set(["kind"], None)),
    ("time", _set(["time"], "yesterday")),
    ("time", _set(["time"], "2025-02-30T00:00:00Z")),
    ("time", _set(["time"], "2025-06-01T24:00:00Z")),
    ("time", _set(["time"], "2025-06-01 12:00:00")),
    ("agent", _set(["agent"], None)),
    ("model", _set(["model"], 3)),
    ("otel", _set(["otel"], "trace")),
    ("otel.trace_id", _set(["otel", "trace_id"], "0" * 32)),
    ("otel.span_id", _set(["otel", "span_id"], "00f067aa0ba902b")),
    ("otel.extra", _set(["otel", "extra"], 1)),
    ("evidence.prompt", _set(["evidence", "prompt"], "not a digest")),
    ("evidence", _set(["evidence"], [D1])),
    ("candidates[1].score", _set(["candidates", 1, "score"], 0.5)),
    ("candidates[1].score", _set(["candidates", 1, "score"], "1e3")),
    ("candidates[1].score", _set(["candidates", 1, "score"], "")),
    ("candidates[1].rank", _set(["candidates", 1, "rank"], 0)),
    ("candidates[1].id", _set(["candidates", 1, "id"], "search")),
    ("candidates[0].action.commitment", _set(["candidates", 0, "action"], {"commitment": "x"})),
    ("candidates[0].action", _set(["candidates", 0, "action"], {"commit": "x"})),
    ("candidates[1].action.commitment", _set(["candidates", 1, "action", "commitment"], 1)),
    ("candidates[0].rank", lambda o: o["candidates"][0].pop("rank")),
    ("selected", _set(["selected"], "nobody")),
    ("parameters", _set(["parameters"], [])),
    ("parameters.limit", _set(["parameters", "limit"], 2**53)),
    ("parameters.limit", _set(["parameters", "limit"], -(2**60))),
    ("parameters.limit", _set(["parameters", "limit"], 2.0**60)),
    ("parameters.limit", _set(["parameters", "limit"], float("nan"))),
    ("parameters.limit", _set(["parameters", "limit"], float("-inf"))),
    ("parameters.nested.a[1]", _set(["parameters", "nested", "a", 1], float("inf"))),
    ("parameters.q.commitment", _set(["parameters", "q"], {"commitment": "sha256:XY"})),
    ('parameters["odd key"]', _set(["parameters", "odd key"], {1, 2})),
    ("constraints[1]", _set(["constraints", 1], "no-pii")),
    ("constraints[0]", _set(["constraints", 0], "")),
    ("expected_outcome", _set(["expected_outcome"], 1e300)),
    ("actual_outcome[1]", _set(["actual_outcome"], [0, 2**53])),
    ("payload.extra", _set(["payload", "extra"], 1)),
    ("payload.tool", _set(["kind"], "tool_call")),
    ("payload", _set(["payload"], None)),
    ("extra", _set(["extra"], 1)),
    ("candidates", lambda o: o.update(candidates=[], selected=None)),
]


@pytest.mark.parametrize(("field", "change"), INVALID, ids=[f for f, _ in INVALID])
def test_invalid_records_name_the_field(
    field: str, change: Callable[[dict[str, Any]], object]
) -> None:
    obj = mutated(change)
    with pytest.raises(InvalidRecordError) as info:
        DecisionRecord.from_json_obj(obj)
    assert info.value.field == field
    assert str(info.value).startswith(field + ": ")


@pytest.mark.parametrize("name", RECORD_FIELDS)
def test_missing_fields_are_named(name: str) -> None:
    obj = mutated(lambda o: o.pop(name))
    with pytest.raises(InvalidRecordError, match="missing required field") as info:
        DecisionRecord.from_json_obj(obj)
    assert info.value.field == name


@pytest.mark.parametrize("kind", KINDS)
def test_missing_payload_fields_are_named(kind: str) -> None:
    record = next(r for r in one_of_each_kind() if r.kind == kind)
    for name in PAYLOAD_FIELDS[kind]:
        obj = record.to_json_obj()
        payload = obj["payload"]
        assert isinstance(payload, dict)
        del payload[name]
        with pytest.raises(InvalidRecordError) as info:
            DecisionRecord.from_json_obj(obj)
        assert info.value.field == f"payload.{name}"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"step": NaN}', "$"),
        ('{"a": 1, "a": 1}', "a"),
        ('{"step": 9007199254740993}', "step"),
        ("[1]", "$"),
        ("not json", "$"),
    ],
)
def test_invalid_record_text(text: str, field: str) -> None:
    with pytest.raises(InvalidRecordError) as info:
        DecisionRecord.from_json(text)
    assert info.value.field == field


def test_direct_construction_is_validated() -> None:
    with pytest.raises(InvalidRecordError) as info:
        make(ToolSelection(), step="3")  # type: ignore[arg-type]
    assert info.value.field == "step"
    with pytest.raises(InvalidRecordError) as info:
        make({"tool": "x"})  # type: ignore[arg-type]
    assert info.value.field == "payload"
    with pytest.raises(InvalidRecordError) as info:
        make(ToolCall(tool="t", inputs_used=(D1, "x")))
    assert info.value.field == "payload.inputs_used[1]"
    with pytest.raises(InvalidRecordError) as info:
        make(Plan(steps=()))
    assert info.value.field == "payload.steps"
    with pytest.raises(InvalidRecordError) as info:
        make(MemoryWrite(key="k", value=float("nan"), source="s", trust_label="t"))
    assert info.value.field == "payload.value"
    with pytest.raises(InvalidRecordError) as info:
        make(ConstraintCheck(constraint_id="c", passed=1))  # type: ignore[arg-type]
    assert info.value.field == "payload.passed"
    with pytest.raises(InvalidRecordError) as info:
        run_closed_record("run-1", [(0, b"\x01" * 32), (0, b"\x02" * 32)], agent="a", time=TIME)
    assert info.value.field == "payload.steps[1].step"
    with pytest.raises(InvalidRecordError) as info:
        run_closed_record("run-1", [(5, b"\x01" * 32)], agent="a", time=TIME, step=5)
    assert info.value.field == "step"
    with pytest.raises(InvalidRecordError) as info:
        run_closed_record("run-1", [(0, b"\x01" * 31)], agent="a", time=TIME)
    assert info.value.field == "payload.steps[0]"


def test_valid_edge_values_are_accepted() -> None:
    for when in ["2016-12-31T23:59:60Z", "2025-06-01t12:00:00+05:30", "2024-02-29T00:00:00-00:00"]:
        assert make(Outcome(), time=when).time == when
    limit = 2**53 - 1
    record = make(Outcome(), parameters={"a": limit, "b": -limit, "c": 0.1, "d": -0.0})
    assert DecisionRecord.from_json(record.to_json()) == record
    weird = {"commitment": "not a commitment because of", "other": 1}
    assert make(Outcome(), actual_outcome=weird).actual_outcome == weird
    as_float = mutated(_set(["step"], 3.0))
    assert DecisionRecord.from_json_obj(as_float) == full_record()  # 3.0 and 3 are one number


# --- the published JSON Schema --------------------------------------------------------------------


def load_schema(version: int = records.SCHEMA_VERSION) -> dict[str, Any]:
    text = (
        resources.files("ledger.records")
        .joinpath(f"schemas/decision-record-v{version}.schema.json")
        .read_text()
    )
    schema: dict[str, Any] = json.loads(text)
    return schema


def test_schema_file_matches_the_module() -> None:
    schema = load_schema()
    defs = schema["$defs"]
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert tuple(schema["required"]) == RECORD_FIELDS
    assert tuple(schema["properties"]) == RECORD_FIELDS
    assert schema["additionalProperties"] is False
    assert schema["properties"]["schema"] == {"const": records.SCHEMA_CURRENT}
    assert tuple(defs["usage"]["required"]) == records.USAGE_FIELDS
    assert tuple(defs["cost"]["required"]) == records.COST_FIELDS
    assert tuple(defs["chain"]["required"]) == records.CHAIN_FIELDS
    assert tuple(defs["signature"]["required"]) == records.SIGNATURE_FIELDS
    assert tuple(schema["properties"]["kind"]["enum"]) == KINDS
    for kind in KINDS:
        payload = defs[f"payload_{kind}"]
        assert tuple(payload["required"]) == PAYLOAD_FIELDS[kind]
        assert tuple(payload["properties"]) == PAYLOAD_FIELDS[kind]
        assert payload["additionalProperties"] is False
    dispatched = [rule["if"]["properties"]["kind"]["const"] for rule in schema["allOf"]]
    assert set(dispatched) == set(KINDS)
    assert tuple(defs["candidate"]["required"]) == CANDIDATE_FIELDS
    assert tuple(defs["otel"]["required"]) == OTEL_FIELDS
    assert tuple(defs["run_step"]["required"]) == RUN_STEP_FIELDS


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _json_text_can_hold(change: Callable[[dict[str, Any]], object]) -> bool:
    leaves = _leaves(mutated(change))
    return all(not isinstance(v, float) or math.isfinite(v) for v in leaves)


# Not expressible in JSON Schema: calendar checks, selected-is-a-candidate, unique candidate ids;
# not expressible in JSON text: NaN/Infinity and Python sets.
SCHEMA_EXPRESSIBLE = [
    (f, c)
    for f, c in INVALID
    if f not in {"time", "selected", "candidates[1].id"}
    and not f.startswith('parameters["')
    and _json_text_can_hold(c)
]


def test_schema_accepts_every_valid_record() -> None:
    schema = load_schema()
    for record in [full_record(), *one_of_each_kind(), disclosed_record()[0]]:
        assert schema_errors(schema, record.to_json_obj(), schema) == [], record.kind


@pytest.mark.parametrize(
    ("field", "change"), SCHEMA_EXPRESSIBLE, ids=[f for f, _ in SCHEMA_EXPRESSIBLE]
)
def test_schema_refuses_what_the_validator_refuses(
    field: str, change: Callable[[dict[str, Any]], object]
) -> None:
    schema = load_schema()
    assert schema_errors(schema, mutated(change), schema) != []


def test_the_standard_validator_of_the_http_append_agrees_with_the_module() -> None:
    """``POST /append`` checks records with ``jsonschema`` against the published files: it
    accepts every record ``ledger.records`` accepts (v1 to the current) and refuses every
    invalid one the schema can express, naming the record's path and the schema's."""
    from ledger.http.append import schema_problem

    for record in [full_record(), *one_of_each_kind(), disclosed_record()[0], v1_record()]:
        assert schema_problem(record.to_json_obj()) is None, record.kind
    for field, change in SCHEMA_EXPRESSIBLE:
        problem = schema_problem(mutated(change))
        assert problem is not None, field
        current = f"(schema decision-record-v{records.SCHEMA_VERSION}.schema.json#/"
        assert problem.startswith("$") and current in problem
    v2_in_v1 = {**v1_record().to_json_obj(), "usage": None}
    problem = schema_problem(v2_in_v1)
    assert problem is not None and "decision-record-v1.schema.json#/additionalProperties" in problem


# --- runs -----------------------------------------------------------------------------------------


def build_run(n: int = 5, run: str = "run-1") -> list[DecisionRecord]:
    """``n`` records chained by parent digests, then their run_closed record."""
    body: list[DecisionRecord] = []
    for step in range(n):
        parents = (record_digest(body[-1]).hex(),) if body else ()
        payload = ToolCall(tool=f"tool-{step}", inputs_used=parents)
        body.append(make(payload, step=step, run=run, parent_digests=parents))
    closing = run_closed_record(run, run_steps(body), agent="agent-a", time=TIME, record_id=rid(n))
    return [*body, closing]


def codes(report: RunReport) -> list[str]:
    return [p.code for p in report.problems]


def test_complete_run_checks_clean() -> None:
    run = build_run()
    report = check_run(run)
    assert report.ok and report.records == 6 and report.run_id == "run-1"
    assert report.closed_by == record_digest(run[-1]).hex()
    closing = run[-1]
    assert closing.step == 5 and closing.parent_digests == (record_digest(run[4]).hex(),)
    assert isinstance(closing.payload, RunClosed)
    assert [(s.step, s.record_digest) for s in closing.payload.steps] == [
        (r.step, record_digest(r).hex()) for r in run[:-1]
    ]
    assert json.loads(json.dumps(report.to_json_obj()))["ok"] is True


def test_removed_record_is_missing() -> None:
    run = build_run()
    removed = run.pop(2)
    report = check_run(run)
    assert sorted(codes(report)) == ["missing", "missing_parent"]
    missing = next(p for p in report.problems if p.code == "missing")
    assert missing.step == 2 and missing.record_digest == record_digest(removed).hex()


def test_inserted_record_is_extra() -> None:
    run = build_run()
    intruder = make(Handoff(to_agent="x"), step=7, parent_digests=(record_digest(run[1]).hex(),))
    report = check_run([*run[:-1], intruder, run[-1]], check_order=False)
    assert codes(report) == ["extra", "after_close"]  # step 7 is after the closure's step 5
    assert {p.record_id for p in report.problems} == {intruder.record_id}
    inside = make(Handoff(to_agent="x"), step=2, parent_digests=(record_digest(run[1]).hex(),))
    inside_report = check_run([*run[:-1], inside, run[-1]], check_order=False)
    assert "extra" in codes(inside_report) and "after_close" not in codes(inside_report)
    same_step = make(Handoff(to_agent="x"), step=2)
    assert "extra" in codes(check_run([*run, same_step], check_order=False))


def test_altered_record_is_named() -> None:
    run = build_run()
    obj = run[2].to_json_obj()
    obj["agent"] = "mallory"
    run[2] = DecisionRecord.from_json_obj(obj)
    report = check_run(run)
    assert codes(report) == ["missing_parent", "altered"]
    assert (
        report.problems[1].step == 2
        and report.problems[1].record_digest == record_digest(run[2]).hex()
    )


def test_reordered_records_are_named() -> None:
    run = build_run()
    swapped = [run[0], run[2], run[1], *run[3:]]
    report = check_run(swapped)
    assert codes(report) == ["reordered"]
    assert report.problems[0].step in {1, 2}
    assert check_run(swapped, check_order=False).ok
    closer_first = [run[-1], *run[:-1]]
    assert codes(check_run(closer_first)) == ["reordered"]
    assert check_run(closer_first, check_order=False).ok


def test_other_run_problems() -> None:
    run = build_run()
    assert codes(check_run(run[:-1])) == ["not_closed"]
    assert codes(check_run([*run[:-1], run[0], run[-1]], check_order=False)) == ["duplicate_record"]
    foreign = build_run(2, run="run-2")[0]
    assert "foreign_run" in codes(check_run([*run, foreign], check_order=False))
    second = run_closed_record("run-1", [], agent="a", time=TIME, step=9, record_id=rid(9))
    assert {"multiple_run_closed", "after_close"} <= set(codes(check_run([*run, second])))
    late = make(Outcome(), step=0, parent_digests=(record_digest(run[0]).hex(),))
    assert codes(check_run([run[0], late])) == ["duplicate_step", "parent_not_before", "not_closed"]
    report = check_run([])
    assert report.run_id is None and codes(report) == ["not_closed"]
    assert set(PROBLEM_CODES) >= {p.code for p in report.problems}


def test_step_mismatch_in_a_lying_closure() -> None:
    run = build_run(2)[:-1]
    d0, d1 = (record_digest(r) for r in run)
    closing = run_closed_record("run-1", [(0, d0), (5, d1)], agent="a", time=TIME)
    report = check_run([*run, closing])
    assert codes(report)[0] == "step_mismatch"
    assert report.problems[0].step == 1 and report.problems[0].record_digest == d1.hex()
    assert sorted(p.step or 0 for p in report.problems if p.code == "step_gap") == [2, 3, 4]


def test_a_second_closure_cannot_cut_the_run() -> None:
    """Steps 0-2 and a closure at 3 are logged, then a closure at 4 listing only 0 and 2: the
    presenter shows 0, 2 and the second closure. Steps 1 and 3 are gaps, named."""
    run = build_run(3)
    body = run[:-1]
    cut = run_closed_record(
        "run-1", [(0, record_digest(body[0])), (2, record_digest(body[2]))],
        agent="a", time=TIME, step=4, record_id=rid(8),
    )  # fmt: skip
    report = check_run([body[0], body[2], cut], check_order=True)
    gaps = sorted(p.step or 0 for p in report.problems if p.code == "step_gap")
    assert gaps == [1, 3]
    # Step 2's parent (step 1) is absent and the forged closure does not list it: from the run
    # alone it cannot be told from a parent in another run (lineage allows those), so it is
    # reported as an external parent; the gaps above already fail the run.
    assert record_digest(body[1]).hex() in report.external_parents
    both = check_run([*run, cut])
    assert {"multiple_run_closed", "after_close"} <= set(codes(both))


def test_closure_must_be_the_last_step() -> None:
    run = build_run(3)
    late = make(Outcome(), step=7, parent_digests=(record_digest(run[-1]).hex(),))
    report = check_run([*run, late])
    assert "after_close" in codes(report)
    assert next(p for p in report.problems if p.code == "after_close").step == 7
    at_close = make(Outcome(), step=3, parent_digests=(record_digest(run[2]).hex(),))
    assert "after_close" in codes(check_run([*run[:-1], at_close, run[-1]], check_order=False))


def test_left_out_records_the_closure_lists_fill_no_gap_but_are_missing() -> None:
    run = build_run(4)
    report = check_run([run[0], run[2], run[3], run[-1]])
    assert "step_gap" not in codes(report)
    assert [p.step for p in report.problems if p.code == "missing"] == [1]


def test_precomputed_digests() -> None:
    run = build_run(3)
    given = [record_digest(r).hex() for r in run]
    assert check_run(run, digests=given) == check_run(run)
    with pytest.raises(ValueError):
        check_run(run, digests=given[:1])


# --- module hygiene -------------------------------------------------------------------------------


def test_public_names_exist() -> None:
    for module in (jcs, commitments, records, runs):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_pure_modules_import_no_service_code() -> None:
    probe = (
        "import sys, ledger.records.runs, ledger.records, ledger.records.commitments; "
        "import ledger.core.jcs; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('grpc', 'rocksdict', 'google')]; "
        "assert not bad, bad"
    )
    processes.run([sys.executable, "-c", probe], check=True)


# --- schema versions (docs/formats.md "Schema versions") -----------------------------------------


def test_current_records_are_version_three_and_the_schema_file_says_so() -> None:
    assert records.SCHEMA_VERSION == 3 and records.SCHEMA_CURRENT == "ledger.decision/v3"
    assert records.schema_version(full_record().schema) == 3
    assert records.record_fields(3) == RECORD_FIELDS
    assert records.record_fields(1) == RECORD_FIELDS[: RECORD_FIELDS.index("payload") + 1]
    assert {n for n, v in records.FIELDS_SINCE.items() if v == 2} == {
        "started_at",
        "ended_at",
        "usage",
        "cost",
        "model_parameters",
    }
    assert {n for n, v in records.FIELDS_SINCE.items() if v == 3} == set(records.AGENT_FIELDS)
    assert set(records.FIELDS_SINCE) == set(RECORD_FIELDS)
    assert max(records.FIELDS_SINCE.values()) == records.SCHEMA_VERSION
    schema = load_schema(records.SCHEMA_VERSION)
    assert schema["properties"]["schema"] == {"const": records.SCHEMA_CURRENT}
    assert schema["$id"].endswith(f":v{records.SCHEMA_VERSION}")
    assert f"schema version {records.SCHEMA_VERSION}" in schema["description"]
    # a record written before the mechanism existed (its JSON as logged) still reads
    assert DecisionRecord.from_json(full_record().to_json()) == full_record()


def test_a_newer_version_is_unsupported_never_invalid() -> None:
    newer = {**full_record().to_json_obj(), "schema": "ledger.decision/v4", "derived_by": "x"}
    with pytest.raises(UnsupportedSchemaError) as caught:
        DecisionRecord.from_json_obj(newer)
    assert not isinstance(caught.value, InvalidRecordError)
    assert caught.value.version == 4
    assert "unsupported schema version 4" in str(caught.value)
    assert "upgrade ledger-verify" in str(caught.value)
    far = {**full_record().to_json_obj(), "schema": "ledger.decision/v123456789"}
    with pytest.raises(UnsupportedSchemaError, match="version 123456789"):
        DecisionRecord.from_json_obj(far)
    for bad in ["ledger.decision/v0", "ledger.decision/v01", "ledger.decision/2", "other/v1", 1]:
        with pytest.raises(InvalidRecordError, match=r"^schema: "):
            DecisionRecord.from_json_obj({**full_record().to_json_obj(), "schema": bad})
    absent = full_record().to_json_obj()
    del absent["schema"]
    with pytest.raises(InvalidRecordError, match=r"^schema: missing required field"):
        DecisionRecord.from_json_obj(absent)


def v1_record() -> DecisionRecord:
    """A version-1 record as logged before version 2 existed: no v2 members."""
    c, _ = commit("the user's address", SALT)
    return make(
        ToolSelection(),
        candidates=(Candidate(id="mail", action=c, score="0.5", rank=1),),
        parameters={"q": "weather"},
        schema=SCHEMA_V1,
    )


def test_a_version_one_record_still_reads_verifies_and_keeps_its_digest() -> None:
    old = v1_record()
    obj = old.to_json_obj()
    assert set(obj) == set(records.record_fields(1)) and obj["schema"] == SCHEMA_V1
    text = old.to_json()
    again = DecisionRecord.from_json(text)
    assert again == old and again.to_json() == text and again.usage is None
    assert again.model_parameters == {} and again.started_at is None
    assert record_digest(again) == hashlib.sha256(text.encode()).digest()
    assert schema_errors(load_schema(1), obj, load_schema(1)) == []
    _c, d = commit("the user's address", SALT, field_path="candidates[0].action")
    verify_disclosure(text, d, record_digest(old))
    # v2 members in a v1 record: unknown fields there, refused when constructed
    with pytest.raises(InvalidRecordError, match=r"^usage: unknown field$"):
        DecisionRecord.from_json_obj({**obj, "usage": None})
    with pytest.raises(InvalidRecordError, match=r"^cost: needs schema version 2"):
        make(Outcome(), schema=SCHEMA_V1, cost=Cost(amount="1", currency="EUR"))
    # per-leaf commitments exist from v2 on
    tree = {"commitment": "sha256-tree:3:" + "ab" * 32}
    with pytest.raises(InvalidRecordError, match=r"^actual_outcome: per-leaf commitments need"):
        DecisionRecord.from_json_obj({**obj, "actual_outcome": tree})
    v2 = make(Outcome(), actual_outcome=tree)
    assert v2.actual_outcome == Commitment(bytes.fromhex("ab" * 32), 3)
    assert DecisionRecord.from_json(v2.to_json()).to_json_obj()["actual_outcome"] == tree


V2_INVALID: list[tuple[str, dict[str, Any]]] = [
    ("started_at", {"started_at": "yesterday"}),
    ("ended_at", {"ended_at": "2025-06-01T11:59:59Z", "started_at": "2025-06-01T12:00:00Z"}),
    ("ended_at", {"ended_at": "2025-06-01T13:59:59+02:00", "started_at": "2025-06-01T12:00:00Z"}),
    ("usage.input_tokens", {"usage": {"input_tokens": -1, "output_tokens": 1, "total_tokens": 1}}),
    ("usage.total_tokens", {"usage": {"input_tokens": 1, "output_tokens": 1}}),
    ("usage.x", {"usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2, "x": 1}}),
    ("cost.amount", {"cost": {"amount": "-1", "currency": "USD"}}),
    ("cost.amount", {"cost": {"amount": 0.5, "currency": "USD"}}),
    ("cost.currency", {"cost": {"amount": "1", "currency": "usd"}}),
    ("model_parameters", {"model_parameters": [1]}),
    ('model_parameters[""]', {"model_parameters": {"": 1}}),
    ("model_parameters", {"model_parameters": {"commitment": "sha256:" + "00" * 32}}),
    ("actual_outcome.commitment", {"actual_outcome": {"commitment": "sha256-tree:0:" + "0" * 64}}),
]


@pytest.mark.parametrize(("field", "change"), V2_INVALID, ids=[f for f, _ in V2_INVALID])
def test_version_two_members_are_checked(field: str, change: dict[str, Any]) -> None:
    obj = {**full_record().to_json_obj(), **change}
    with pytest.raises(InvalidRecordError) as info:
        DecisionRecord.from_json_obj(obj)
    assert info.value.field == field
    if field != "ended_at":  # not expressible in JSON Schema: the order of two date-times
        assert schema_errors(load_schema(), obj, load_schema()) != [], field


def test_unknown_fields_of_a_known_version_are_all_named() -> None:
    one = {**full_record().to_json_obj(), "derived_by": "x"}
    with pytest.raises(InvalidRecordError, match=r"^derived_by: unknown field$"):
        DecisionRecord.from_json_obj(one)
    two = {**one, "agent_key": "y"}
    with pytest.raises(InvalidRecordError, match="unknown fields 'derived_by', 'agent_key'"):
        DecisionRecord.from_json_obj(two)


_BAD_COMMITMENT = {"commitment": "sha256:xyz"}
_COMMITMENT_PROBLEM = (
    "expected 'sha256:' + 64 lowercase hex digits, or 'sha256-tree:<leaves>:' + 64"
)


@pytest.mark.parametrize(
    ("member", "value", "message"),
    [
        ("parameters", {"q": [1, {"a": _BAD_COMMITMENT}]},
         f"parameters.q[1].a.commitment: {_COMMITMENT_PROBLEM}"),
        ("parameters", {"a b": [_BAD_COMMITMENT]},
         f'parameters["a b"][0].commitment: {_COMMITMENT_PROBLEM}'),
        ("evidence", {"p": "00", "x y": "zz"},
         "evidence.p: expected 64 lowercase hex digits (SHA-256), got '00'"),
        ("parent_digests", ["a" * 64, "zz"],
         "parent_digests[1]: expected 64 lowercase hex digits (SHA-256), got 'zz'"),
        ("parent_digests", ["a" * 64, "a" * 64], "parent_digests[1]: duplicate entry"),
        ("actual_outcome", [[[_BAD_COMMITMENT]]],
         f"actual_outcome[0][0][0].commitment: {_COMMITMENT_PROBLEM}"),
        ("model_parameters", {"t": {"k": [_BAD_COMMITMENT]}},
         f"model_parameters.t.k[0].commitment: {_COMMITMENT_PROBLEM}"),
        ("constraints", ["a", ""], 'constraints[1]: expected a non-empty string, got ""'),
        ("candidates", [{"id": "a", "action": "x", "score": "1", "rank": 1},
                        {"id": "b", "action": _BAD_COMMITMENT, "score": "1", "rank": 1}],
         f"candidates[1].action.commitment: {_COMMITMENT_PROBLEM}"),
        ("step", -1, "step: -1 outside [0, 2**53 - 1]"),
        ("step", 2.5, "step: expected an integer >= 0, got number"),
        ("usage", {"input_tokens": -1, "output_tokens": None, "total_tokens": None},
         "usage.input_tokens: -1 outside [0, 2**53 - 1]"),
    ],
)  # fmt: skip
def test_the_quick_readers_name_a_problem_where_it_is(
    member: str, value: Any, message: str
) -> None:
    """The readers build an item's field path only when reading again to name a problem: the
    named place (deep inside lists and objects, odd member names) is what it always was."""
    obj = full_record().to_json_obj()
    obj[member] = copy.deepcopy(value)
    with pytest.raises(InvalidRecordError) as info:
        DecisionRecord.from_json_obj(obj, checked=True)
    assert str(info.value) == message
