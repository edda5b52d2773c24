"""The compiled fast reading of a decision record (ledger/core/_recordread.c) and its pure twin
(``decision._parse_record_fast`` and ``decision._record_fast``) give identical arguments and
records, the types of every member included, and identical refusals (exception type, field and
message) or None, for records of every schema version and kind, mutated ones, and values that
are not records at all.

`make test` runs this module on the compiled build and again under ``LEDGER_PURE=1``, but for
the two comparisons that call both readings by name, never the selected one (the same code in
both runs: the Makefile's ``PURE_SAME``); where the compiled reading is not built (a pure
install) they skip, naming why.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from datetime import datetime
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core import accel, jcs
from ledger.core.errors import FormatError
from ledger.records import decision
from ledger.records.decision import DecisionRecord, new_record_id

pytestmark = pytest.mark.slow

SAFE = 2**53 - 1


def compiled() -> ModuleType:
    try:
        from ledger.core import _recordread
    except ImportError as exc:
        pytest.skip(f"the compiled record reader is not built ({exc}): nothing to compare with")
    _recordread.configure(decision._compiled_config())  # as decision does when it selects it
    return _recordread


# --- plain records of every version and kind (small pools: the shared caches get hits) ---------

texts = st.text(max_size=6)
names = st.sampled_from(["a", "t", "tool-0", "search", "é"]) | st.text(min_size=1, max_size=5)
digests = st.sampled_from(["a" * 64, "b" * 64]) | st.binary(min_size=32, max_size=32).map(bytes.hex)
commitment_objs = st.one_of(
    digests.map(lambda h: {"commitment": "sha256:" + h}),
    st.builds(lambda n, h: {"commitment": f"sha256-tree:{n}:{h}"}, st.integers(1, 9), digests),
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-SAFE, SAFE)
    | st.floats(-SAFE, SAFE, allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    scalars | commitment_objs,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(texts, kids, max_size=3),
    max_leaves=8,
)
times = st.sampled_from(["2026-05-28T20:26:39.000Z", "2025-06-01T12:00:00+05:30"]) | st.builds(
    lambda dt, frac, zone: f"{dt:%Y-%m-%dT%H:%M:%S}{frac}{zone}",
    st.datetimes(min_value=datetime(1000, 1, 1)),
    st.sampled_from(["", ".5", ".123456789"]),
    st.sampled_from(["Z", "+05:30", "-00:00", "z"]),
)
ids = st.sampled_from(["019e7044-8800-7048-91b9-e51eae8b8e83"]) | st.builds(
    new_record_id,
    now_ms=st.integers(0, 2**48 - 1),
    rand=st.binary(min_size=10, max_size=10),
)
otels = st.none() | st.fixed_dictionaries(
    {
        "trace_id": st.binary(min_size=16, max_size=16).filter(any).map(bytes.hex),
        "span_id": st.binary(min_size=8, max_size=8).filter(any).map(bytes.hex),
    }
)
scores = st.from_regex(r"-?(0|[1-9][0-9]{0,3})(\.[0-9]{1,3})?", fullmatch=True)
counts = st.none() | st.sampled_from([0, 20, 100]) | st.integers(0, SAFE)
usages = st.none() | st.fixed_dictionaries(
    {"input_tokens": counts, "output_tokens": counts, "total_tokens": counts}
)
costs = st.none() | st.fixed_dictionaries(
    {
        "amount": st.sampled_from(["0.001", "0", "12.50"])
        | st.from_regex(r"(0|[1-9][0-9]{0,3})(\.[0-9]{1,3})?", fullmatch=True),
        "currency": st.sampled_from(["USD", "EUR"]) | st.from_regex(r"[A-Z]{3}", fullmatch=True),
    }
)
hex32 = st.binary(min_size=16, max_size=16).map(bytes.hex)
chains = st.none() | st.builds(
    lambda i, seq, tag, why: {
        "id": i,
        "seq": seq,
        "tag": tag,
        "genesis": why if seq == 0 else None,
    },
    hex32,
    st.integers(0, 3),
    hex32,
    names,
)
signatures = st.none() | st.fixed_dictionaries(
    {
        "key": names,
        "key_id": st.binary(min_size=4, max_size=4).map(bytes.hex),
        "sig": st.sampled_from(["A" * 86 + "==", "+/" * 43 + "=="]),
    }
)
unique_digests = st.lists(digests, unique=True, max_size=3)
text_or_commitment = names | commitment_objs
payloads: st.SearchStrategy[tuple[str, dict[str, Any]]] = st.one_of(
    st.just(("tool_selection", {})),
    st.tuples(st.just("parameter_construction"), st.fixed_dictionaries({"tool": names})),
    st.tuples(
        st.just("tool_call"),
        st.fixed_dictionaries(
            {"tool": names, "inputs_used": unique_digests, "outputs_generated": unique_digests}
        ),
    ),
    st.tuples(st.just("termination"), st.fixed_dictionaries({"reason": text_or_commitment})),
    st.tuples(
        st.just("memory_write"),
        st.fixed_dictionaries(
            {"key": names, "value": json_values, "source": names, "trust_label": names}
        ),
    ),
    st.tuples(
        st.just("constraint_check"),
        st.fixed_dictionaries({"constraint_id": names, "passed": st.booleans()}),
    ),
    st.tuples(
        st.just("plan"),
        st.fixed_dictionaries({"steps": st.lists(text_or_commitment, min_size=1, max_size=3)}),
    ),
    st.tuples(st.just("handoff"), st.fixed_dictionaries({"to_agent": names})),
    st.just(("outcome", {})),
    st.tuples(
        st.just("run_closed"),
        st.fixed_dictionaries(
            {
                "steps": st.lists(st.integers(0, 30), unique=True, max_size=4).map(
                    lambda steps: [{"step": s, "record_digest": f"{s:064x}"} for s in sorted(steps)]
                )
            }
        ),
    ),
)


@st.composite
def plain_records(draw: st.DrawFn) -> dict[str, Any]:
    """A record's JSON, mostly valid, of schema v1, v2 or v3."""
    kind, payload = draw(payloads)
    cands = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "id": names,
                    "action": text_or_commitment,
                    "score": scores,
                    "rank": st.integers(1, 5),
                }
            ),
            max_size=3,
        )
    )
    version = draw(st.sampled_from([1, 2, 3, 3]))
    record: dict[str, Any] = {
        "schema": f"ledger.decision/v{version}",
        "record_id": draw(ids),
        "run_id": draw(names),
        "step": draw(st.sampled_from([0, 1, 31]) | st.integers(0, SAFE)),
        "parent_digests": draw(unique_digests),
        "kind": kind,
        "time": draw(times),
        "agent": draw(names),
        "model": draw(st.none() | names),
        "otel": draw(otels),
        "evidence": draw(st.dictionaries(names, digests, max_size=2)),
        "candidates": cands,
        "selected": draw(st.none() | st.sampled_from([c["id"] for c in cands])) if cands else None,
        "parameters": draw(st.dictionaries(texts, json_values, max_size=3)),
        "constraints": draw(st.lists(names, unique=True, max_size=2)),
        "expected_outcome": draw(json_values),
        "actual_outcome": draw(json_values),
        "payload": payload,
    }
    if version >= 2:
        record |= {
            "started_at": draw(st.none() | times),
            "ended_at": draw(st.none() | times),
            "usage": draw(usages),
            "cost": draw(costs),
            "model_parameters": draw(st.dictionaries(names, json_values, max_size=2)),
        }
    if version >= 3:
        record |= {"chain": draw(chains), "signature": draw(signatures)}
    return record


ODD: st.SearchStrategy[Any] = st.sampled_from(
    [
        *(None, True, False, 0, 1, 1.0, 2.0, -1, 2**53, "", "x", "USD", "0.5", [], {}, [[]]),
        *(["a"], "a" * 64, "A" * 64, "0" * 32, "0" * 16, "1" * 32, "1" * 16, "é" * 64),
        {"commitment": "sha256:" + "ab" * 32},
        {"commitment": "sha256:" + "AB" * 32},
        {"commitment": "sha256-tree:3:" + "cd" * 32},
        {"commitment": "bad"},
        {"commitment": 1},
        {"trace_id": "1" * 32, "span_id": "1" * 16},
        {"trace_id": "0" * 32, "span_id": "1" * 16},
        {"amount": "1", "currency": "USD"},
        {"amount": "01", "currency": "USD"},
        {"amount": "1.", "currency": "usd"},
        {"amount": True, "currency": "USD"},
        {"input_tokens": 1, "output_tokens": True, "total_tokens": None},
        {"input_tokens": 1.0, "output_tokens": 2, "total_tokens": None},
        {"input_tokens": -1, "output_tokens": 2, "total_tokens": None},
        {"step": 1, "record_digest": "a" * 64},
        ["a" * 64, "a" * 64],
        [{"id": "x", "action": "y", "score": "1", "rank": 1}] * 2,
        "2026-02-30T00:00:00Z",
        "ledger.decision/v9",
        "ledger.decision/v1",
        "019e7044-8800-6048-91b9-e51eae8b8e83",
    ]
)
_D = "a" * 64
_C = {"commitment": "sha256:" + _D}
# per member, values a check just refuses (or just lets through): each check's edge
NEAR: dict[str, list[Any]] = {
    "schema": ["ledger.decision/v4", "ledger.decision/v0", "ledger.decision/v01", 3],
    "record_id": [
        "019e7044-8800-6048-91b9-e51eae8b8e83", "019E7044-8800-7048-91B9-E51EAE8B8E83",
        "019e7044-8800-7048-c1b9-e51eae8b8e83", "019e7044_8800-7048-91b9-e51eae8b8e83",
        "019e7044-8800-7048-91b9-e51eae8b8e8", "019e7044-8800-7048-91b9-e51eae8b8e8é",
    ],
    "run_id": ["", 1, None],
    "agent": ["", 1, None],
    "step": [-1, True, 1.0, 2**53 - 1, 0],
    "model": ["", 1, "m"],
    "selected": ["", "nobody", 1],
    "parent_digests": [[_D, _D], [_D.upper()], [_D[:-1]], [_D + "0"], [1], (_D,), [_D, "b" * 64]],
    "time": ["2026-02-30T00:00:00Z", "2026-05-28T24:00:00Z", "2026-05-28T20:26:60Z",
             "2026-05-28 20:26:39Z", "2026-05-28T20:26:39+24:00", "2026-05-28T20:26:39.5Z", 1],
    "otel": [{"trace_id": t, "span_id": i} for t, i in
             [("0" * 32, "1" * 16), ("1" * 32, "0" * 16), ("A" * 32, "1" * 16),
              ("1" * 31, "1" * 16), ("1" * 32, "1" * 15), (1, "1" * 16)]]
            + [{"trace_id": "1" * 32, "span_id": "1" * 16, "x": 1}, {"trace_id": "1" * 32}, []],
    "evidence": [{"": _D}, {"x": _D.upper()}, {"x": 1}, {"x": _D, "y": _D}, [], {"x": _C}],
    "candidates": [[{"id": "x", "action": "y", "score": "1", "rank": 1}] * 2,
                   [{"id": "x", "action": _C, "score": "01", "rank": 1}],
                   [{"id": "x", "action": "y", "score": "1", "rank": 0}], [1]],
    "parameters": [{"commitment": "sha256:" + _D}, {"commitment": "x"}, {"p": {"commitment": "x"}},
                   {"p": [{"commitment": "sha256:" + _D.upper()}]}, {"p": _C, "commitment": 1},
                   {"p": {"commitment": "sha256-tree:0:" + _D}}, []],
    "constraints": [["x", "x"], [""], [1], ()],
    "expected_outcome": [{"commitment": "bad"}, [{"commitment": "sha256-tree:2:" + _D}], _C],
    "actual_outcome": [{"a": {"commitment": 1}}, [[_C]], {"commitment": "sha256:" + _D[:-1]}],
    "started_at": ["2026-05-28T20:26:39Z", "2026-05-28T20:26:40Z", "2026-13-01T00:00:00Z"],
    "ended_at": ["2026-05-28T20:26:38Z", "2026-05-28T20:26:39Z", "x"],
    "usage": [{"input_tokens": True, "output_tokens": 1, "total_tokens": None},
              {"input_tokens": 1.0, "output_tokens": 1, "total_tokens": None},
              {"input_tokens": -1, "output_tokens": 1, "total_tokens": None},
              {"input_tokens": 2**53 - 1, "output_tokens": 0, "total_tokens": None},
              {"input_tokens": 1, "output_tokens": 1}, {"input_tokens": 1, "output_tokens": 1,
                                                         "total_tokens": 1, "x": 1}],
    "cost": [{"amount": a, "currency": c} for a, c in
             [("01", "USD"), ("1.", "USD"), (".5", "USD"), ("-1", "USD"), ("1", "usd"),
              ("1", "US"), ("1", "USDX"), (1, "USD"), ("0.0", "USD"), ("1e3", "USD"),
              ("١", "USD"), ("1", "ÜSD")]] + [{"amount": "1"}, {"amount": "1", "x": "USD"}],
    "model_parameters": [{"": 1}, {"commitment": "sha256:" + _D}, {"t": {"commitment": "x"}}, []],
    "chain": [{"id": "1" * 32, "seq": 0, "tag": "2" * 32, "genesis": None},
              {"id": "1" * 32, "seq": 1, "tag": "2" * 32, "genesis": None}],
    "signature": [{"key": "k", "key_id": "0011aabb", "sig": "A" * 86 + "="}],
    "payload": [{"tool": ""}, {"tool": "t", "inputs_used": [_D, _D], "outputs_generated": []},
                {"tool": "t", "inputs_used": [], "outputs_generated": [_D.upper()]},
                {"tool": "t", "inputs_used": [[]], "outputs_generated": []},
                {"tool": 1, "inputs_used": [], "outputs_generated": []},
                {"constraint_id": "c", "passed": 1}, {"constraint_id": "", "passed": True},
                {"key": "k", "value": {"commitment": "x"}, "source": "s", "trust_label": "l"},
                {"key": "k", "value": _C, "source": "", "trust_label": "l"},
                {"steps": [{"step": 2, "record_digest": _D}, {"step": 1, "record_digest": _D}]},
                {"steps": []}, {"reason": _C}, {"to_agent": ""}, {}, {"x": 1}],
}  # fmt: skip
# what only a caller's own objects (not JSON text read) hold: subclasses, tuples, big numbers
PYTHON_ONLY: st.SearchStrategy[Any] = st.sampled_from(
    [(1, 2), ("a" * 64,), 2**64, -(2**70), float("inf"), b"x", frozenset(), object]
)


class Text(str):
    """A str subclass: readings that take exact types only must leave it to the plain one."""


def _mutate(value: Any, draw: Callable[[st.SearchStrategy[Any]], Any], odd: Any) -> Any:
    """``value`` with one member or element somewhere replaced, removed or added."""
    if isinstance(value, dict) and value and draw(st.integers(0, 3)):
        key = draw(st.sampled_from(sorted(value)))
        out = dict(value)
        how = draw(st.sampled_from(["deeper", "replace", "replace", "remove", "add"]))
        if how == "deeper":
            out[key] = _mutate(value[key], draw, odd)
        elif how == "replace":
            out[key] = draw(st.sampled_from(NEAR[key]) | odd if key in NEAR else odd)
        elif how == "remove":
            del out[key]
        else:
            out[draw(st.sampled_from(["extra", "kind", "tool", "value", "step", ""]))] = 1
        return out
    if isinstance(value, list) and value and draw(st.integers(0, 3)):
        i = draw(st.integers(0, len(value) - 1))
        return [*value[:i], _mutate(value[i], draw, odd), *value[i + 1 :]]
    return draw(odd)


def typed(value: Any) -> Any:
    """``value`` written out with the type of every part (a tuple is not a list, ``2`` not
    ``2.0`` nor ``True``, a str subclass not a str), members in their order."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            type(value).__name__,
            tuple((f.name, typed(getattr(value, f.name))) for f in dataclasses.fields(value)),
        )
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(typed(v) for v in value))
    if isinstance(value, dict):
        return (type(value).__name__, tuple((typed(k), typed(v)) for k, v in value.items()))
    return (type(value).__name__, repr(value))


def outcome(read: Callable[[Any], Any], value: Any) -> tuple[Any, ...]:
    """What a reading gives: its arguments or record with their types, None, or its refusal
    (any exception: its type, field and message)."""
    try:
        got = read(value)
    except Exception as exc:  # every refusal compared, whatever its type
        return ("raised", type(exc).__name__, getattr(exc, "field", None), str(exc))
    return ("left",) if got is None else ("read", typed(got))


def both_alike(
    native: ModuleType, twin: ModuleType, value: Any, native_first: bool
) -> tuple[Any, ...]:
    """The compiled and the pure (``twin``'s) answers to ``value``, asserted equal (the shared
    caches filled by either one first)."""
    pairs = [(native.parse, twin._parse_record_fast), (native.record, twin._record_fast)]
    answers = []
    for compiled_read, pure_read in pairs:
        if native_first:
            got = outcome(compiled_read, value)
            assert got == outcome(pure_read, value)
        else:
            want = outcome(pure_read, value)
            got = outcome(compiled_read, value)
            assert got == want
        answers.append(got)
    return tuple(answers)


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(plain_records(), st.integers(0, 2), st.booleans(), st.data())
def test_compiled_and_pure_read_alike(
    plain: dict[str, Any], mutations: int, native_first: bool, data: st.DataObject
) -> None:
    """Records as JSON text reads them (exact types), valid or mutated."""
    native = compiled()
    for _ in range(mutations):
        plain = _mutate(plain, data.draw, ODD | json_values)
    try:
        read = jcs.loads_strict(jcs.canonical_bytes(plain), safe_numbers=True)
    except FormatError:  # not I-JSON: no reader sees it
        return
    parsed, built = both_alike(native, decision, read, native_first)
    if mutations == 0:
        assert parsed[0] in ("read", "raised")  # a usual record is read, not left
    if built[0] == "read":  # and it is the record the plain reading gives
        assert typed(decision._built(decision._parse_record(read))) == built[1]


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(plain_records(), st.integers(1, 3), st.booleans(), st.data())
def test_compiled_and_pure_refuse_alike(
    plain: dict[str, Any], mutations: int, native_first: bool, data: st.DataObject
) -> None:
    """Values no JSON text gives (a caller's own objects): subclasses, tuples, numbers beyond
    I-JSON, non-JSON types, anywhere in a record, and values that are no record at all."""
    native = compiled()
    odd = ODD | PYTHON_ONLY | json_values | texts.map(Text)
    value: Any = plain
    for _ in range(mutations):
        value = _mutate(value, data.draw, odd)
    both_alike(native, decision, value, native_first)
    both_alike(native, decision, {**plain, "run_id": Text("r")}, native_first)


def test_the_selector_picks_one_reading() -> None:
    """``LEDGER_PURE=1`` reads with the twin; otherwise the compiled reading when it is built;
    ``from_json_obj`` uses the selected one."""
    pure = os.environ.get("LEDGER_PURE", "") not in ("", "0")
    if pure or accel.record_read is None:
        assert accel.RECORD_CORE == "pure" and accel.record_read is None
        assert decision._read_fast is decision._record_fast
        assert decision._parse_fast is decision._parse_record_fast
    else:
        assert accel.RECORD_CORE == "native"
        assert decision._read_fast is accel.record_read
        assert decision._parse_fast is accel.record_parse


def test_a_configuration_of_other_members_is_refused() -> None:
    """Configured by ``ledger.records.decision`` with the classes it builds; a configuration
    that no longer matches the record members is refused (a new member needs the C reading
    updated), and the reading keeps its configuration."""
    native = compiled()
    config = decision._compiled_config()
    config["fields_of"] = {**config["fields_of"], 3: (*config["fields_of"][3], "extra")}
    with pytest.raises(RuntimeError, match="members of v3 changed"):
        native.configure(config)
    record = DecisionRecord.from_json_obj(
        {
            "schema": "ledger.decision/v1",
            "record_id": "019e7044-8800-7048-91b9-e51eae8b8e83",
            "run_id": "r",
            "step": 0,
            "parent_digests": [],
            "kind": "outcome",
            "time": "2026-05-28T20:26:39.000Z",
            "agent": "a",
            "model": None,
            "otel": None,
            "evidence": {},
            "candidates": [],
            "selected": None,
            "parameters": {},
            "constraints": [],
            "expected_outcome": None,
            "actual_outcome": None,
            "payload": {},
        }
    )
    assert typed(native.record(record.to_json_obj())) == typed(record)


def test_a_key_whose_comparison_changes_the_record_is_read_by_the_twin() -> None:
    """A caller's dict whose key is a str subclass with its own ``__eq__`` (Python code run in
    the middle of a look-up) that empties a member the reading has already found: the compiled
    reading must not use what was freed (it crashed the process before) and answers as the twin
    does, since only plain JSON of the exact built-in types is read in C."""
    native = compiled()
    base = DecisionRecord(
        record_id=new_record_id(), run_id="r", step=3, time="2026-05-28T20:26:39.000Z",
        agent="a", payload=decision.ToolCall(tool="t", inputs_used=("a" * 64,),
                                             outputs_generated=("b" * 64,)),
    ).to_json_obj()  # fmt: skip
    steps: list[dict[str, Any]] = []

    def fresh() -> tuple[dict[str, Any], dict[str, Any]]:
        value = {**base, "parameters": {f"k{i}": [f"x{i}"] * 50 for i in range(200)}}
        closing = {**base, "kind": "run_closed", "payload": {"steps": steps}}
        return value, closing

    value, closing = fresh()

    class Key(str):
        __hash__ = str.__hash__

        def __eq__(self, other: object) -> bool:
            if value.get("parameters"):
                value["parameters"] = {}  # the dict the reading looked up first, freed
                [dict.fromkeys(range(3000), 7) for _ in range(30)]  # its memory reused
            steps.clear()
            return str.__eq__(self, other)

    def planted() -> None:
        value.update(fresh()[0])
        value[Key("signature")] = value.pop("signature")
        steps[:] = [{Key("step"): 0, "record_digest": "a" * 64}] + [
            {"step": i, "record_digest": "a" * 64} for i in range(1, 50)
        ]

    for compiled_read, pure_read in [
        (native.parse, decision._parse_record_fast),
        (native.record, decision._record_fast),
    ]:
        for subject in (value, closing):
            planted()
            want = outcome(pure_read, subject)
            planted()
            assert outcome(compiled_read, subject) == want
