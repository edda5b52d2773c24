"""Hypothesis: records round-trip exactly, digests see every change, disclosures open only what
was committed, JCS agrees with a naive reference, check_run names every run mutation, and a
digest hashed from the JSON a record was read from is the record's digest."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core import jcs
from ledger.core.errors import FormatError, InvalidRecordError, RecordError
from ledger.records import decision
from ledger.records.commitments import Commitment, Disclosure, commit
from ledger.records.decision import (
    RECORD_FIELDS,
    Candidate,
    ConstraintCheck,
    DecisionRecord,
    Handoff,
    MemoryWrite,
    OtelContext,
    Outcome,
    ParameterConstruction,
    Payload,
    Plan,
    RunClosed,
    RunStep,
    Termination,
    ToolCall,
    ToolSelection,
    Usage,
    new_record_id,
    record_digest,
    record_digest_of_plain,
    uuid7_time_ms,
    verify_disclosure,
)
from ledger.records.runs import check_run, run_closed_record, run_steps

SAFE = 2**53 - 1
TIME = "2025-06-01T12:00:00Z"

texts = st.text(max_size=10)
names = st.text(min_size=1, max_size=8)
hex32 = st.binary(min_size=32, max_size=32).map(bytes.hex)
commitments = st.binary(min_size=32, max_size=32).map(Commitment)
safe_floats = st.floats(-SAFE, SAFE, allow_nan=False, allow_infinity=False)
scalars = st.none() | st.booleans() | st.integers(-SAFE, SAFE) | safe_floats | texts


def not_commitment_shaped(obj: dict[str, Any]) -> bool:
    return set(obj) != {"commitment"}


json_values = st.recursive(
    scalars | commitments,
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.dictionaries(texts, kids, max_size=3).filter(not_commitment_shaped)
    ),
    max_leaves=8,
)
plain_json = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(texts, kids, max_size=4),
    max_leaves=12,
)
record_ids = st.builds(
    new_record_id,
    now_ms=st.integers(0, 2**48 - 1),
    rand=st.binary(min_size=10, max_size=10),
)
times = st.builds(
    lambda dt, frac, zone: f"{dt:%Y-%m-%dT%H:%M:%S}{frac}{zone}",
    st.datetimes(min_value=datetime(1000, 1, 1)),
    st.sampled_from(["", ".5", ".123456789"]),
    st.sampled_from(["Z", "+05:30", "-00:00", "z"]),
)
otels = st.none() | st.builds(
    OtelContext,
    trace_id=st.binary(min_size=16, max_size=16).filter(any).map(bytes.hex),
    span_id=st.binary(min_size=8, max_size=8).filter(any).map(bytes.hex),
)
scores = st.from_regex(r"-?(0|[1-9][0-9]{0,5})(\.[0-9]{1,4})?", fullmatch=True)
candidates = st.builds(
    Candidate, id=names, action=names | commitments, score=scores, rank=st.integers(1, 50)
)
digest_tuples = st.lists(hex32, unique=True, max_size=3).map(tuple)
payloads: st.SearchStrategy[Payload] = st.one_of(
    st.just(ToolSelection()),
    st.builds(ParameterConstruction, tool=names),
    st.builds(ToolCall, tool=names, inputs_used=digest_tuples, outputs_generated=digest_tuples),
    st.builds(Termination, reason=names),
    st.builds(MemoryWrite, key=names, value=json_values, source=names, trust_label=names),
    st.builds(ConstraintCheck, constraint_id=names, passed=st.booleans()),
    st.builds(Plan, steps=st.lists(names | commitments, min_size=1, max_size=3).map(tuple)),
    st.builds(Handoff, to_agent=names),
    st.just(Outcome()),
    st.builds(
        RunClosed,
        steps=st.lists(
            st.tuples(st.integers(0, 10_000), hex32), max_size=4, unique_by=lambda t: t[0]
        )
        .map(sorted)
        .map(lambda ts: tuple(RunStep(step=s, record_digest=d) for s, d in ts)),
    ),
)


@st.composite
def records(draw: st.DrawFn) -> DecisionRecord:
    payload = draw(payloads)
    cands = draw(st.lists(candidates, max_size=3, unique_by=lambda c: c.id))
    if isinstance(payload, ToolSelection) and not cands:
        cands = [Candidate(id="only", action="act", score="1", rank=1)]
    selected = draw(st.none() | st.sampled_from([c.id for c in cands])) if cands else None
    step = draw(
        st.integers(10_001, SAFE) if isinstance(payload, RunClosed) else st.integers(0, SAFE)
    )
    return DecisionRecord(
        record_id=draw(record_ids),
        run_id=draw(names),
        step=step,
        time=draw(times),
        agent=draw(names),
        payload=payload,
        parent_digests=draw(digest_tuples),
        model=draw(st.none() | names),
        otel=draw(otels),
        evidence=draw(st.dictionaries(names, hex32, max_size=3)),
        candidates=tuple(cands),
        selected=selected,
        parameters=draw(
            st.dictionaries(texts, json_values, max_size=4).filter(not_commitment_shaped)
        ),
        constraints=tuple(draw(st.lists(names, unique=True, max_size=3))),
        expected_outcome=draw(json_values),
        actual_outcome=draw(json_values),
    )


@settings(max_examples=50)
@given(records())
def test_records_round_trip_exactly(record: DecisionRecord) -> None:
    text = record.to_json()
    assert DecisionRecord.from_json(text) == record
    assert DecisionRecord.from_json_obj(record.to_json_obj()) == record
    assert DecisionRecord.from_json(text).to_json() == text
    assert record_digest(DecisionRecord.from_json(text.encode())) == record_digest(record)


@settings(max_examples=40)
@given(records(), records())
def test_every_changed_field_changes_the_digest(a: DecisionRecord, b: DecisionRecord) -> None:
    base = a.to_json_obj()
    other = b.to_json_obj()
    digest = record_digest(a)
    for name in RECORD_FIELDS:
        if jcs.canonical_bytes(base[name]) == jcs.canonical_bytes(other[name]):
            continue
        changed = {**base, name: other[name]}
        if name in {"kind", "payload"}:
            changed.update(kind=other["kind"], payload=other["payload"])
        try:
            mutated = DecisionRecord.from_json_obj(changed)
        except InvalidRecordError:
            continue  # e.g. `selected` naming a candidate the other record does not have
        assert record_digest(mutated) != digest
    assert (record_digest(a) == record_digest(b)) == (a.to_json() == b.to_json())


@given(plain_json)
def test_canonical_form_is_a_fixed_point(value: jcs.Json) -> None:
    once = jcs.canonical_bytes(value)
    assert jcs.canonical_bytes(jcs.loads_strict(once)) == once
    assert jcs.canonical_bytes(_reverse_members(value)) == once


def _reverse_members(value: jcs.Json) -> jcs.Json:
    if isinstance(value, dict):
        return {k: _reverse_members(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reverse_members(v) for v in value]
    return value


ascii_keys = st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=6)
no_float_json = st.recursive(
    st.none() | st.booleans() | st.integers(-SAFE, SAFE) | texts,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(ascii_keys, kids, max_size=4),
    max_leaves=12,
)


@given(no_float_json)
def test_jcs_matches_a_naive_reference_without_floats(value: jcs.Json) -> None:
    """With ASCII keys (UTF-16 order = code point order) and no floats, JCS is sorted compact
    JSON with Python's escaping, which matches RFC 8785 §3.2.2.2 for these characters."""
    naive = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert jcs.canonical_bytes(value) == naive.encode("utf-8")


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_serialisation_round_trips(value: float) -> None:
    text = jcs.canonical_bytes(value).decode()
    assert float(text) == value
    if abs(value) <= SAFE or "e" in text:  # else an integer literal a strict reader refuses
        assert text == jcs.canonical_bytes(jcs.loads_strict(text)).decode()


@given(json_values, json_values, st.binary(min_size=16, max_size=16))
def test_disclosure_opens_only_the_committed_value(value: Any, other: Any, salt: bytes) -> None:
    commitment, disclosure = commit(value, salt, field_path="actual_outcome")
    record = DecisionRecord(
        record_id=new_record_id(now_ms=0, rand=bytes(10)),
        run_id="r",
        step=0,
        time=TIME,
        agent="a",
        payload=Outcome(),
        actual_outcome=commitment,
    )
    digest = record_digest(record)
    verify_disclosure(record.to_json(), disclosure, digest)
    if jcs.canonical_bytes(other) != jcs.canonical_bytes(value):
        forged = Disclosure("actual_outcome", jcs.to_plain(other), salt)
        try:
            verify_disclosure(record, forged, digest)
        except RecordError:
            return
        raise AssertionError("a different value opened the commitment")


@given(st.integers(0, 2**48 - 1), st.binary(min_size=10, max_size=10))
def test_uuid7_layout_for_any_input(now_ms: int, rand: bytes) -> None:
    value = new_record_id(now_ms=now_ms, rand=rand)
    raw = bytes.fromhex(value.replace("-", ""))
    assert raw[6] >> 4 == 7 and raw[8] >> 6 == 0b10
    assert uuid7_time_ms(value) == now_ms
    assert raw[9:] == rand[3:] and raw[7] == rand[1]


def chain(n: int) -> list[DecisionRecord]:
    out: list[DecisionRecord] = []
    for step in range(n):
        parents = (record_digest(out[-1]).hex(),) if out else ()
        out.append(
            DecisionRecord(
                record_id=new_record_id(now_ms=step, rand=bytes(10)),
                run_id="run",
                step=step,
                time=TIME,
                agent="a",
                payload=ToolCall(tool=f"t{step}", inputs_used=parents),
                parent_digests=parents,
            )
        )
    return [*out, run_closed_record("run", run_steps(out), agent="a", time=TIME)]


MUTATIONS = ["remove", "insert", "alter", "swap"]
EXPECTED = {"remove": "missing", "insert": "extra", "alter": "altered", "swap": "reordered"}


@settings(max_examples=60)
@given(st.integers(2, 8), st.sampled_from(MUTATIONS), st.data())
def test_check_run_names_every_mutation(n: int, how: str, data: st.DataObject) -> None:
    run = chain(n)
    assert check_run(run).ok
    at = data.draw(st.integers(0, n - 2))
    if how == "remove":
        del run[at]
    elif how == "insert":
        run.insert(at, DecisionRecord.from_json_obj({**run[at].to_json_obj(), "step": 100 + at}))
    elif how == "alter":
        run[at] = DecisionRecord.from_json_obj({**run[at].to_json_obj(), "agent": "mallory"})
    else:
        run[at], run[at + 1] = run[at + 1], run[at]
    report = check_run(run)
    assert not report.ok
    assert EXPECTED[how] in {p.code for p in report.problems}


@settings(max_examples=60)
@given(st.integers(2, 9), st.data())
def test_a_closure_over_any_strict_subset_cannot_pass_as_complete(
    n: int, data: st.DataObject
) -> None:
    """However a presenter picks a subset of a run and a closure listing exactly that subset,
    the steps it drops are named (``step_gap``), unless it drops only a tail and closes right
    after it, which is a shorter run, closed at its own last step."""
    body = chain(n)[:-1]
    kept = sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n - 1)))
    close_step = data.draw(st.integers(max(kept) + 1, n + 2))
    shown = [body[i] for i in kept]
    closure = run_closed_record(
        "run", [(r.step, record_digest(r)) for r in shown], agent="a", time=TIME,
        step=close_step, parent_digests=[record_digest(shown[-1])],
    )  # fmt: skip
    report = check_run([*shown, closure])
    gaps = sorted(p.step or 0 for p in report.problems if p.code == "step_gap")
    assert gaps == [s for s in range(close_step) if s not in kept]
    if gaps:
        assert not report.ok
    else:  # a prefix closed at its end: complete as far as the closure says
        assert kept == list(range(len(kept))) and close_step == len(kept)


# --- the digest the run reader hashes from the JSON it read -------------------------------------


def _shuffle(value: Any, draw: st.DrawFn) -> Any:
    if isinstance(value, dict):
        keys = draw(st.permutations(list(value)))
        return {k: _shuffle(value[k], draw) for k in keys}
    if isinstance(value, list):
        return [_shuffle(v, draw) for v in value]
    return value


@st.composite
def read_plain(draw: st.DrawFn) -> dict[str, Any]:
    """A record's JSON as a reader may get it: members in any order, integers written as
    integral floats (``2.0``) where the reader takes integers, and older schema versions."""
    record: DecisionRecord = draw(records())
    counts = st.none() | st.integers(0, 10**6)
    usage = draw(st.none() | st.builds(Usage, input_tokens=counts, output_tokens=counts))
    obj: dict[str, Any] = dict(record.to_json_obj())
    obj["usage"] = None if usage is None else usage.to_json_obj()
    version = draw(st.sampled_from([1, 2, 3]))
    if version < 3:
        del obj["chain"], obj["signature"]
    if version < 2:
        for name in ("started_at", "ended_at", "usage", "cost", "model_parameters"):
            del obj[name]
    obj["schema"] = f"ledger.decision/v{version}"
    if draw(st.booleans()) and obj["step"] <= SAFE // 2:
        obj["step"] = float(obj["step"])
    if obj.get("usage") and obj["usage"]["input_tokens"] is not None and draw(st.booleans()):
        obj["usage"]["input_tokens"] = float(obj["usage"]["input_tokens"])
    return dict(_shuffle(obj, draw))


@settings(max_examples=1000, deadline=None)
@given(read_plain())
def test_digest_of_the_plain_json_is_the_records_digest(plain: dict[str, Any]) -> None:
    text = jcs.canonical_bytes(plain)
    read = jcs.loads_strict(text, safe_numbers=True)
    try:
        record = DecisionRecord.from_json_obj(read, checked=True)
    except InvalidRecordError:  # v1 lacks what the strategy may draw (a committed reason)
        return
    assert record_digest_of_plain(read) == record_digest(record)
    assert record_digest_of_plain(plain) == record_digest(record)
    whole, exact = jcs.loads_exact(text, safe_numbers=True)
    assert record_digest_of_plain(whole, exact=exact) == record_digest(record)
    # beside a number with a fraction and a character outside the BMP: not exact, same digest
    line = jcs.canonical_bytes({"other": [1.5, "\U0001f600"], "record": plain})
    whole, exact = jcs.loads_exact(line, safe_numbers=True)
    assert isinstance(whole, dict) and not exact
    assert record_digest_of_plain(whole["record"], exact=exact) == record_digest(record)


# --- the record reader's fast path reads exactly what the plain reading reads -------------------

ODD_VALUES: st.SearchStrategy[Any] = st.sampled_from(
    [
        *(None, True, False, 0, 1, 1.0, 2.0, -1, 2**53, "", "x", "USD", "0.5", [], {}, [[]]),
        *(["a"], "a" * 64, "A" * 64, "0" * 32, "0" * 16, "1" * 32, "1" * 16, TIME),
        {"commitment": "sha256:" + "ab" * 32},
        {"commitment": "sha256-tree:3:" + "cd" * 32},
        {"commitment": "bad"},
        {"trace_id": "1" * 32, "span_id": "1" * 16},
        {"amount": "1", "currency": "USD"},
        {"amount": True, "currency": "USD"},
        {"input_tokens": 1, "output_tokens": True, "total_tokens": None},
        {"input_tokens": 1.0, "output_tokens": 2, "total_tokens": None},
        {"step": 1, "record_digest": "a" * 64},
        ["a" * 64, "a" * 64],
    ]
)


def _mutate(value: Any, draw: Callable[[st.SearchStrategy[Any]], Any]) -> Any:
    """``value`` with one member or element somewhere replaced, removed or added."""
    if isinstance(value, dict) and value and draw(st.integers(0, 3)):
        key = draw(st.sampled_from(sorted(value)))
        out = dict(value)
        how = draw(st.sampled_from(["deeper", "replace", "remove", "add"]))
        if how == "deeper":
            out[key] = _mutate(value[key], draw)
        elif how == "replace":
            out[key] = draw(ODD_VALUES | plain_json)
        elif how == "remove":
            del out[key]
        else:
            out[draw(st.sampled_from(["extra", "kind", "tool", "value", "step"]))] = 1
        return out
    if isinstance(value, list) and value and draw(st.integers(0, 3)):
        i = draw(st.integers(0, len(value) - 1))
        return [*value[:i], _mutate(value[i], draw), *value[i + 1 :]]
    return draw(ODD_VALUES | plain_json)


def _reading(read: Any, plain: Any) -> tuple[Any, ...]:
    """What a reading gives: its arguments written out with their types (``repr``: ``2`` is
    not ``2.0``, a tuple not a list), or its refusal."""
    try:
        args = read(plain)
    except FormatError as exc:
        return ("refused", type(exc).__name__, getattr(exc, "field", None), str(exc))
    return ("left", None) if args is None else ("read", repr(sorted(args.items())))


@settings(max_examples=1500, deadline=None)
@given(read_plain(), st.integers(0, 2), st.data())
def test_the_fast_record_reading_is_the_plain_reading(
    plain: dict[str, Any], mutations: int, data: st.DataObject
) -> None:
    for _ in range(mutations):
        plain = _mutate(plain, data.draw)
    try:
        read = jcs.loads_strict(jcs.canonical_bytes(plain), safe_numbers=True)
    except FormatError:  # not I-JSON (an integer beyond 2**53 - 1): no reader sees it
        return
    plain_reading = _reading(decision._parse_record, read)
    assert _reading(decision._record_args, read) == plain_reading
    fast = _reading(decision._parse_record_fast, read)  # left to the plain reading, or equal
    assert fast[0] in ("refused", "left") or fast == plain_reading


# --- shared payloads: a payload read again is the one read before, or read as the plain way ----

_SMALL_TEXT = st.sampled_from(["", "t", "u", "a" * 64, "b" * 64, "A" * 64])
_SMALL_ITEM: st.SearchStrategy[Any] = _SMALL_TEXT | st.sampled_from([1, 1.0, True, None, [], {}])
_DIGESTS = st.lists(st.sampled_from(["a" * 64, "b" * 64]), max_size=2)
_PAYLOAD_VALUES: st.SearchStrategy[tuple[str, Any]] = st.one_of(
    st.tuples(
        st.just("tool_call"),
        st.fixed_dictionaries(
            {
                "tool": st.just("t") | _SMALL_ITEM,
                "inputs_used": _DIGESTS | st.lists(_SMALL_ITEM, max_size=2) | _SMALL_ITEM,
                "outputs_generated": _DIGESTS | st.lists(_SMALL_ITEM, max_size=2) | _SMALL_ITEM,
            }
        ),
    ),
    st.tuples(st.just("parameter_construction"), st.fixed_dictionaries({"tool": _SMALL_ITEM})),
    st.tuples(
        st.just("run_closed"),
        st.fixed_dictionaries(
            {
                "steps": st.lists(
                    st.fixed_dictionaries(
                        {
                            "step": st.sampled_from([0, 1, 2, -1, 1.0, True, 2**53]),
                            "record_digest": _SMALL_ITEM,
                        }
                    ),
                    max_size=3,
                )
                | _SMALL_ITEM
            }
        ),
    ),
    st.tuples(
        st.just("constraint_check"),
        st.fixed_dictionaries(
            {"constraint_id": _SMALL_ITEM, "passed": st.sampled_from([True, False, 1, 0, None])}
        ),
    ),
)


def _payload_reading(read: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    try:
        payload = read(*args)
    except FormatError as exc:
        return ("refused", type(exc).__name__, getattr(exc, "field", None), str(exc))
    return ("read", type(payload).__name__, repr(payload))


@settings(max_examples=400, deadline=None)
@given(st.lists(_PAYLOAD_VALUES, min_size=1, max_size=12))
def test_shared_payloads_read_as_the_plain_reading(payloads: list[tuple[str, Any]]) -> None:
    """Payloads drawn from a few values, so most are read again after an equal one (shared)
    or after one that differs only in an item's type or place: each reads as the plain
    reading reads it."""
    for kind, value in payloads * 2:
        fast = _payload_reading(decision._payload_fast, kind, value)
        assert fast == _payload_reading(decision._payload, kind, value, "payload")
