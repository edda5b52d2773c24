"""Decision records, schemas v1 and v2: the dataclass, its validator, digests and record ids.

Pure: standard library plus ``rfc8785`` (through ``ledger.core.jcs``), no I/O. docs/design.md
"Decision record (v1)"; the published JSON Schemas (draft 2020-12) are ``ledger/records/schemas/
decision-record-v<N>.schema.json`` and say the same thing as this module. Version 2 adds
``started_at``/``ended_at`` (RFC 3339, ended not before started), ``usage`` (token counts),
``cost`` (decimal amount and ISO 4217 currency) and ``model_parameters``, and allows per-leaf
(``sha256-tree:``) commitments (docs/formats.md "Version 2 members").

* A record is one JSON object with exactly the members ``RECORD_FIELDS`` (optional ones are
  ``null`` or empty, never absent, so that reading and writing are exact inverses and the digest
  of what was read is the digest of what was written). ``kind`` selects the ``payload`` shape
  (``PAYLOAD_FIELDS``); ``tool_call`` follows W3C PROV: an activity that *used* the inputs and
  *generated* the outputs, both given as digests.
* ``record_digest`` is SHA-256 over the RFC 8785 canonical bytes (``ledger.core.jcs``).
* ``record_id`` is a UUIDv7 (RFC 9562 §5.7) in lowercase 8-4-4-4-12 form; ``time`` is the
  client's RFC 3339 §5.6 timestamp (a claim: the log's own time is in the leaf).
* Digests in a record (``parent_digests``, ``evidence``, PROV inputs/outputs, ``run_closed``
  steps) are 64 lowercase hex digits of SHA-256. Sensitive values are replaced by salted
  commitments (``ledger.records.commitments``) anywhere a JSON value, a candidate action or a plan
  step is allowed.
* Numbers must lie within +-(2**53 - 1) and be finite; candidate scores are decimal strings.
* Schema versions (docs/formats.md "Schema versions"): ``schema`` is ``ledger.decision/v<N>``;
  this code reads versions 1 to ``SCHEMA_VERSION`` (a record of version N has exactly the
  members ``FIELDS_SINCE`` lists at N or below) and refuses a newer one with
  ``UnsupportedSchemaError`` ("unsupported schema version N"), checked before any other member.

Invalid records are refused with ``InvalidRecordError`` whose ``field`` names the path, e.g.
``candidates[1].score``. Run-level checks (parents, the ``run_closed`` list) are
``ledger.records.runs``.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time as _time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar, TypeAlias, cast

from ledger.core import accel
from ledger.core.errors import (
    FormatError,
    InvalidRecordError,
    MalformedHashError,
    RecordError,
    UnsupportedSchemaError,
)
from ledger.core.jcs import (
    Json,
    Reader,
    canonical_bytes,
    canonical_exact,
    canonical_plain,
    child_path,
    index_path,
    loads_strict,
    read_bool,
    read_int,
    read_list,
    read_matching,
    read_object,
    read_optional,
    read_text,
    to_plain,
    wrong_type,
)
from ledger.core.limits import HASH_SIZE
from ledger.records.commitments import (
    COMMITMENT_KEY,
    AnyDisclosure,
    Commitment,
    JsonValue,
    Kept,
    check_disclosure_in,
    is_commitment_obj,
)

__all__ = [
    "AGENT_FIELDS",
    "CANDIDATE_FIELDS",
    "CHAIN_FIELDS",
    "COST_FIELDS",
    "FIELDS_SINCE",
    "KINDS",
    "OTEL_FIELDS",
    "PAYLOAD_FIELDS",
    "PAYLOAD_TYPES",
    "RECORD_FIELDS",
    "RUN_STEP_FIELDS",
    "SCHEMA_CURRENT",
    "SCHEMA_PREFIX",
    "SCHEMA_V1",
    "SCHEMA_V2",
    "SCHEMA_VERSION",
    "SIGNATURE_FIELDS",
    "USAGE_FIELDS",
    "AgentSignature",
    "Candidate",
    "ChainLink",
    "ConstraintCheck",
    "Cost",
    "DecisionRecord",
    "Handoff",
    "MemoryWrite",
    "OtelContext",
    "Outcome",
    "ParameterConstruction",
    "Payload",
    "Plan",
    "RunClosed",
    "RunStep",
    "Termination",
    "ToolCall",
    "ToolSelection",
    "Usage",
    "new_record_id",
    "record_digest",
    "record_digest_of_plain",
    "record_fields",
    "schema_version",
    "uuid7_time_ms",
    "verify_disclosure",
]

SCHEMA_VERSION = 3  # the newest record schema this code reads and writes (docs/formats.md)
SCHEMA_PREFIX = "ledger.decision/v"  # the ``schema`` member is SCHEMA_PREFIX + version
SCHEMA_V1 = "ledger.decision/v1"
SCHEMA_V2 = "ledger.decision/v2"
SCHEMA_CURRENT = f"{SCHEMA_PREFIX}{SCHEMA_VERSION}"
RECORD_FIELDS = (
    "schema",
    "record_id",
    "run_id",
    "step",
    "parent_digests",
    "kind",
    "time",
    "agent",
    "model",
    "otel",
    "evidence",
    "candidates",
    "selected",
    "parameters",
    "constraints",
    "expected_outcome",
    "actual_outcome",
    "payload",
    "started_at",
    "ended_at",
    "usage",
    "cost",
    "model_parameters",
    "chain",
    "signature",
)
# issue 26: the agent's chain position and its signature (docs/formats.md "Agent signatures")
AGENT_FIELDS = ("chain", "signature")
# The schema version that added each member: a record of version N has exactly the members
# added at N or before. An issue that adds a member bumps SCHEMA_VERSION and lists it here.
FIELDS_SINCE: Mapping[str, int] = {
    **dict.fromkeys(RECORD_FIELDS[: RECORD_FIELDS.index("payload") + 1], 1),
    # v2 (issue 25): when the step ran, what it consumed and cost, how the model was set
    **dict.fromkeys(("started_at", "ended_at", "usage", "cost", "model_parameters"), 2),
    # v3 (issue 26): the agent's chain position and its signature
    **dict.fromkeys(AGENT_FIELDS, 3),
}
PER_LEAF_SINCE = 2  # per-leaf (sha256-tree:) commitments and committed reasons: from v2 on
USAGE_FIELDS = ("input_tokens", "output_tokens", "total_tokens")
COST_FIELDS = ("amount", "currency")
CANDIDATE_FIELDS = ("id", "action", "score", "rank")
OTEL_FIELDS = ("trace_id", "span_id")
RUN_STEP_FIELDS = ("step", "record_digest")
CHAIN_FIELDS = ("id", "seq", "tag", "genesis")
SIGNATURE_FIELDS = ("key", "key_id", "sig")

_SCHEMA_NAME = re.compile(re.escape(SCHEMA_PREFIX) + r"([1-9][0-9]{0,8})")
_UUID7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
_AMOUNT = re.compile(r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?")
_CURRENCY = re.compile(r"[A-Z]{3}")
_HEX32 = re.compile(r"[0-9a-f]{32}")
_KEY_ID = re.compile(r"[0-9a-f]{8}")
_SIG_B64 = re.compile(r"[A-Za-z0-9+/]{86}==")
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_SPAN_ID = re.compile(r"[0-9a-f]{16}")
_RFC3339 = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-]([0-9]{2}):([0-9]{2}))"
)


# --- the v1 types --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class OtelContext:
    """OpenTelemetry join key: W3C Trace Context ids as lowercase hex (not all zero)."""

    trace_id: str
    span_id: str

    def to_json_obj(self) -> dict[str, object]:
        return {"trace_id": self.trace_id, "span_id": self.span_id}


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token counts of the step (v2): each a count >= 0, or ``None`` when not reported."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None

    def to_json_obj(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in USAGE_FIELDS}


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    """What the step cost (v2): ``amount`` a non-negative decimal string, ``currency`` an
    ISO 4217 code (``"USD"``)."""

    amount: str
    currency: str

    def to_json_obj(self) -> dict[str, object]:
        return {"amount": self.amount, "currency": self.currency}


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One option considered: ``score`` is a decimal string (``"0.87"``), ``rank`` >= 1."""

    id: str
    action: str | Commitment
    score: str
    rank: int

    def to_json_obj(self) -> dict[str, object]:
        return {"id": self.id, "action": self.action, "score": self.score, "rank": self.rank}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStep:
    """One entry of a ``run_closed`` list: a step and the hex digest of its record."""

    step: int
    record_digest: str

    def to_json_obj(self) -> dict[str, object]:
        return {"step": self.step, "record_digest": self.record_digest}


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainLink:
    """A run's place in its agent's chain (on the run's first record only): the chain ``id``
    (32 hex), the run's sequence number ``seq``, the public ``tag`` HMAC(chain key, seq)
    truncated to 16 bytes (32 hex) and, on the chain's first run (seq 0), why it started
    (``genesis``). docs/formats.md "Agent chains"."""

    id: str
    seq: int
    tag: str
    genesis: str | None = None

    def to_json_obj(self) -> dict[str, object]:
        return {"id": self.id, "seq": self.seq, "tag": self.tag, "genesis": self.genesis}


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSignature:
    """The agent's Ed25519 signature of the record: key name, 4-byte key ID (8 hex) and the
    base64 signature (``ledger.records.agent``)."""

    key: str
    key_id: str
    sig: str

    def to_json_obj(self) -> dict[str, object]:
        return {"key": self.key, "key_id": self.key_id, "sig": self.sig}


class _Payload:
    """Kind-specific part of a record; ``KIND`` is the record's ``kind``."""

    __slots__ = ()
    KIND: ClassVar[str]

    def to_json_obj(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSelection(_Payload):
    """Choosing a tool among ``candidates`` (at least one); the choice is ``selected``."""

    KIND: ClassVar[str] = "tool_selection"


@dataclass(frozen=True, slots=True, kw_only=True)
class ParameterConstruction(_Payload):
    """Building ``parameters`` for a call to ``tool``."""

    KIND: ClassVar[str] = "parameter_construction"
    tool: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall(_Payload):
    """A W3C PROV activity: calling ``tool`` *used* inputs and *generated* outputs (digests)."""

    KIND: ClassVar[str] = "tool_call"
    tool: str
    inputs_used: tuple[str, ...] = ()
    outputs_generated: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Termination(_Payload):
    """The agent stopping, and why."""

    KIND: ClassVar[str] = "termination"
    reason: str | Commitment  # a commitment from schema v2 on


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryWrite(_Payload):
    """Writing ``value`` (usually a commitment) under ``key``: its ``source`` and trust label."""

    KIND: ClassVar[str] = "memory_write"
    key: str
    value: JsonValue
    source: str
    trust_label: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConstraintCheck(_Payload):
    """Checking constraint ``constraint_id``; ``passed`` is the verdict."""

    KIND: ClassVar[str] = "constraint_check"
    constraint_id: str
    passed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan(_Payload):
    """An ordered, non-empty list of planned steps (text or commitments)."""

    KIND: ClassVar[str] = "plan"
    steps: tuple[str | Commitment, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Handoff(_Payload):
    """Passing control to ``to_agent``."""

    KIND: ClassVar[str] = "handoff"
    to_agent: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome(_Payload):
    """The observed result of earlier decisions (``actual_outcome`` vs ``expected_outcome``)."""

    KIND: ClassVar[str] = "outcome"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunClosed(_Payload):
    """The run's ordered list of (step, record digest), steps strictly increasing."""

    KIND: ClassVar[str] = "run_closed"
    steps: tuple[RunStep, ...]


Payload: TypeAlias = (
    ToolSelection
    | ParameterConstruction
    | ToolCall
    | Termination
    | MemoryWrite
    | ConstraintCheck
    | Plan
    | Handoff
    | Outcome
    | RunClosed
)
_PAYLOAD_CLASSES: tuple[type[_Payload], ...] = (
    ToolSelection,
    ParameterConstruction,
    ToolCall,
    Termination,
    MemoryWrite,
    ConstraintCheck,
    Plan,
    Handoff,
    Outcome,
    RunClosed,
)
PAYLOAD_TYPES: Mapping[str, type[_Payload]] = {cls.KIND: cls for cls in _PAYLOAD_CLASSES}
KINDS = tuple(PAYLOAD_TYPES)
PAYLOAD_FIELDS: Mapping[str, tuple[str, ...]] = {
    kind: tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
    for kind, cls in PAYLOAD_TYPES.items()
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionRecord:
    """One decision of one agent run (schema ``ledger.decision/v<N>``, by default the newest);
    the kind is the payload's. Members a version lacks keep their defaults (``None``/``{}``).

    Construction validates (``InvalidRecordError`` naming the field) and normalises: sequences
    become tuples, commitment objects become ``Commitment``, JSON values become plain lists and
    dicts. So ``from_json_obj(r.to_json_obj()) == r`` and ``from_json(r.to_json()) == r``.
    """

    record_id: str
    run_id: str
    step: int
    time: str
    agent: str
    payload: Payload
    parent_digests: tuple[str, ...] = ()
    model: str | None = None
    otel: OtelContext | None = None
    evidence: Mapping[str, str] = field(default_factory=dict)
    candidates: tuple[Candidate, ...] = ()
    selected: str | None = None
    parameters: Mapping[str, JsonValue] = field(default_factory=dict)
    constraints: tuple[str, ...] = ()
    expected_outcome: JsonValue = None
    actual_outcome: JsonValue = None
    started_at: str | None = None
    ended_at: str | None = None
    usage: Usage | None = None
    cost: Cost | None = None
    model_parameters: Mapping[str, JsonValue] = field(default_factory=dict)
    chain: ChainLink | None = None
    signature: AgentSignature | None = None
    schema: str = SCHEMA_CURRENT

    def __post_init__(self) -> None:
        if not isinstance(self.payload, _PAYLOAD_CLASSES):
            raise InvalidRecordError("payload", f"expected one of {[*PAYLOAD_TYPES]} payloads")
        version = schema_version(self.schema)
        for name, default in _LATER_DEFAULTS.items():
            if FIELDS_SINCE[name] > version and getattr(self, name) != default:
                raise InvalidRecordError(
                    name, f"needs schema version {FIELDS_SINCE[name]} (the record is {version})"
                )
        for name, value in _record_args(self.to_json_obj()).items():
            object.__setattr__(self, name, value)

    @property
    def kind(self) -> str:
        """The record kind, one of ``KINDS`` (taken from the payload type)."""
        return self.payload.KIND

    def to_json_obj(self) -> dict[str, Json]:
        """The record as plain JSON with exactly the members ``RECORD_FIELDS``."""
        names = record_fields(schema_version(self.schema))
        raw = {name: getattr(self, name) for name in names if name != "kind"}
        raw["kind"] = self.kind
        plain = to_plain(raw, safe_numbers=True)
        assert isinstance(plain, dict)
        return plain

    @classmethod
    def from_json_obj(cls, obj: object, *, checked: bool = False) -> DecisionRecord:
        """Validate a JSON object and build the record (inverse of ``to_json_obj``).

        ``checked``: ``obj`` came from ``loads_strict(..., safe_numbers=True)``, so its I-JSON
        limits need no second pass. Validated once: the fast reading (compiled,
        ``ledger.core._recordread``, or its twin ``_record_fast``) builds the record from
        fields already normalised, and what it leaves or refuses ``_parse_record`` reads (or
        refuses, naming the problem), so the second parse ``__post_init__`` makes for direct
        construction is skipped (an index reads hundreds of thousands of records)."""
        plain = cast(Json, obj) if checked else to_plain(obj, safe_numbers=True)
        if cls is DecisionRecord:  # the fast reading (compiled, or its twin), else the plain
            try:
                found = _read_fast(plain)
            except FormatError:  # refused: the plain reading names the problem
                found = None
            return _built(_parse_record(plain)) if found is None else found
        record = object.__new__(cls)
        for name, value in _record_args(plain).items():
            object.__setattr__(record, name, value)
        return record

    def to_json(self) -> str:
        """RFC 8785 canonical JSON text (the bytes ``record_digest`` hashes, decoded)."""
        return canonical_bytes(self.to_json_obj()).decode("utf-8")

    @classmethod
    def from_json(cls, text: str | bytes) -> DecisionRecord:
        """Strictly parse JSON text and validate it (inverse of ``to_json``)."""
        return cls.from_json_obj(loads_strict(text, safe_numbers=True), checked=True)


_SETTERS: Mapping[str, Callable[[DecisionRecord, object], None]] = {
    f.name: getattr(DecisionRecord, f.name).__set__ for f in fields(DecisionRecord)
}


def _built(args: Mapping[str, Any]) -> DecisionRecord:
    """A record of already read and checked arguments, each slot set through its own setter
    (what ``object.__setattr__`` calls, found once: no second validation)."""
    record = object.__new__(DecisionRecord)
    for name, value in args.items():
        _SETTERS[name](record, value)
    return record


# --- validation: each reader takes (JSON value, field path) and returns the typed value ----------

_digest = read_matching(_DIGEST, "64 lowercase hex digits (SHA-256)")
_score = read_matching(_DECIMAL, "a decimal string such as '0.87'")
_record_id = read_matching(_UUID7, "a lowercase UUIDv7")


_TIMES_SEEN: set[str] = set()  # date-times found valid (records of a run share a few)


def _rfc3339(value: Json, path: str) -> str:
    if type(value) is str and value in _TIMES_SEEN:
        return value
    if not isinstance(value, str) or (match := _RFC3339.fullmatch(value)) is None:
        raise InvalidRecordError(path, f"expected an RFC 3339 date-time, got {value!r}")
    year, month, day, hour, minute, second, off_h, off_m = (int(g or 0) for g in match.groups())
    try:
        datetime(year, month, day, hour, minute, min(second, 59))
    except ValueError as exc:
        raise InvalidRecordError(path, f"not a valid date-time: {exc}") from exc
    if second > 60 or off_h > 23 or off_m > 59:
        raise InvalidRecordError(path, f"not a valid date-time: {value!r}")
    if type(value) is str:
        if len(_TIMES_SEEN) >= 4096:
            _TIMES_SEEN.clear()
        _TIMES_SEEN.add(value)
    return value


_SCALARS = (str, int, float, bool, type(None))


def _json_value(value: Json, path: str) -> JsonValue:
    if type(value) in _SCALARS:  # exact JSON scalar types: nothing to convert
        return value
    try:  # the path names a problem only: built per item when reading again to name it
        return _json_value_at(value, None)
    except FormatError:
        return _json_value_at(value, path)


def _json_value_at(value: Json, path: str | None) -> JsonValue:
    """``value`` with its commitments read; ``path`` None: no field paths built (a problem is
    then named by reading again with the path)."""
    if type(value) in _SCALARS:
        return value
    if is_commitment_obj(value):
        return Commitment.from_json_obj(value, path or "")
    if isinstance(value, list):
        if path is None:
            return [_json_value_at(v, None) for v in value]
        return [_json_value_at(v, index_path(path, i)) for i, v in enumerate(value)]
    if isinstance(value, dict):
        if path is None:
            return {k: _json_value_at(v, None) for k, v in value.items()}
        return {k: _json_value_at(v, child_path(path, k)) for k, v in value.items()}
    return value


def _text_or_commitment(value: Json, path: str) -> str | Commitment:
    if type(value) is str and value:
        return value
    if is_commitment_obj(value):
        return Commitment.from_json_obj(value, path)
    return read_text(value, path)


def _parameters(value: Json, path: str) -> dict[str, JsonValue]:
    if not isinstance(value, dict):
        raise wrong_type(path, "an object of named parameters", value)
    if is_commitment_obj(value):
        raise InvalidRecordError(path, "commit single parameters, not the whole object")
    return _members(value, path, _json_value)


def _members(value: dict[str, Json], path: str, read: Reader) -> dict[str, Any]:
    """Each member's value through ``read``; the readers use the path only to name a problem,
    so each member's own path is built only when reading again to name it."""
    try:
        return {k: read(v, path) for k, v in value.items()}
    except FormatError:
        return {k: read(v, child_path(path, k)) for k, v in value.items()}


def _evidence(value: Json, path: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise wrong_type(path, "an object mapping names to digests", value)
    if "" in value:
        raise InvalidRecordError(child_path(path, ""), "evidence names are non-empty")
    return _members(value, path, _digest)


def _otel_id(pattern: re.Pattern[str], what: str) -> Reader:
    matching = read_matching(pattern, what)

    def read(value: Json, path: str) -> str:
        text: str = matching(value, path)
        if not text.strip("0"):
            raise InvalidRecordError(path, "an all-zero id is invalid")
        return text

    return read


_trace_id = _otel_id(_TRACE_ID, "32 lowercase hex digits")
_span_id = _otel_id(_SPAN_ID, "16 lowercase hex digits")


def _otel(value: Json, path: str) -> OtelContext:
    obj = read_object(value, path, OTEL_FIELDS)
    return OtelContext(
        trace_id=_trace_id(obj["trace_id"], f"{path}.trace_id"),
        span_id=_span_id(obj["span_id"], f"{path}.span_id"),
    )


def _chain(value: Json, path: str) -> ChainLink:
    obj = read_object(value, path, CHAIN_FIELDS)
    link = ChainLink(
        id=read_matching(_HEX32, "32 lowercase hex digits")(obj["id"], f"{path}.id"),
        seq=read_int(obj["seq"], f"{path}.seq", minimum=0),
        tag=read_matching(_HEX32, "32 lowercase hex digits")(obj["tag"], f"{path}.tag"),
        genesis=read_optional(read_text)(obj["genesis"], f"{path}.genesis"),
    )
    if (link.seq == 0) != (link.genesis is not None):
        raise InvalidRecordError(f"{path}.genesis", "a chain's run 0 (and only it) has a genesis")
    return link


def _signature(value: Json, path: str) -> AgentSignature:
    obj = read_object(value, path, SIGNATURE_FIELDS)
    return AgentSignature(
        key=read_text(obj["key"], f"{path}.key"),
        key_id=read_matching(_KEY_ID, "8 lowercase hex digits")(obj["key_id"], f"{path}.key_id"),
        sig=read_matching(_SIG_B64, "a base64 Ed25519 signature")(obj["sig"], f"{path}.sig"),
    )


def _candidate(value: Json, path: str) -> Candidate:
    obj = read_object(value, path, CANDIDATE_FIELDS)
    return Candidate(
        id=read_text(obj["id"], f"{path}.id"),
        action=_text_or_commitment(obj["action"], f"{path}.action"),
        score=_score(obj["score"], f"{path}.score"),
        rank=read_int(obj["rank"], f"{path}.rank", minimum=1),
    )


_count = read_optional(read_int)


def _usage(value: Json, path: str) -> Usage:
    obj = read_object(value, path, USAGE_FIELDS)
    counts = {n: _count(obj[n], f"{path}.{n}") for n in USAGE_FIELDS}
    return Usage(**counts)


_amount = read_matching(_AMOUNT, "a non-negative decimal string such as '0.0042'")
_currency = read_matching(_CURRENCY, "an ISO 4217 code such as 'USD'")


def _cost(value: Json, path: str) -> Cost:
    obj = read_object(value, path, COST_FIELDS)
    return Cost(
        amount=_amount(obj["amount"], f"{path}.amount"),
        currency=_currency(obj["currency"], f"{path}.currency"),
    )


def _model_parameters(value: Json, path: str) -> dict[str, JsonValue]:
    if not isinstance(value, dict):
        raise wrong_type(path, "an object of named model parameters", value)
    if is_commitment_obj(value):
        raise InvalidRecordError(path, "commit single model parameters, not the whole object")
    if "" in value:
        raise InvalidRecordError(child_path(path, ""), "model parameter names are non-empty")
    return _members(value, path, _json_value)


def _run_step(value: Json, path: str) -> RunStep:
    obj = read_object(value, path, RUN_STEP_FIELDS)
    return RunStep(
        step=read_int(obj["step"], f"{path}.step"),
        record_digest=_digest(obj["record_digest"], f"{path}.record_digest"),
    )


def _run_steps(value: Json, path: str) -> tuple[RunStep, ...]:
    steps: tuple[RunStep, ...] = read_list(value, path, _run_step)
    for i in range(1, len(steps)):
        if steps[i].step <= steps[i - 1].step:
            raise InvalidRecordError(f"{path}[{i}].step", "steps must strictly increase")
    return steps


def _plan_steps(value: Json, path: str) -> tuple[str | Commitment, ...]:
    steps: tuple[str | Commitment, ...] = read_list(value, path, _text_or_commitment)
    if not steps:
        raise InvalidRecordError(path, "a plan has at least one step")
    return steps


def _digests(value: Json, path: str) -> tuple[str, ...]:
    return read_list(value, path, _digest, unique=True)


_PAYLOAD_READERS: Mapping[str, Mapping[str, Reader]] = {
    "tool_selection": {},
    "parameter_construction": {"tool": read_text},
    "tool_call": {"tool": read_text, "inputs_used": _digests, "outputs_generated": _digests},
    "termination": {"reason": _text_or_commitment},
    "memory_write": {
        "key": read_text,
        "value": _json_value,
        "source": read_text,
        "trust_label": read_text,
    },
    "constraint_check": {"constraint_id": read_text, "passed": read_bool},
    "plan": {"steps": _plan_steps},
    "handoff": {"to_agent": read_text},
    "outcome": {},
    "run_closed": {"steps": _run_steps},
}

_PAYLOAD_NAMES = {kind: tuple(readers) for kind, readers in _PAYLOAD_READERS.items()}
_PAYLOAD_PATHS = {
    kind: {name: child_path("payload", name) for name in names}
    for kind, names in _PAYLOAD_NAMES.items()
}

_FIELD_READERS: Mapping[str, Reader] = {
    "record_id": _record_id,
    "run_id": read_text,
    "step": read_int,
    "parent_digests": _digests,
    "time": _rfc3339,
    "agent": read_text,
    "model": read_optional(read_text),
    "otel": read_optional(_otel),
    "evidence": _evidence,
    "candidates": lambda v, p: read_list(v, p, _candidate),
    "selected": read_optional(read_text),
    "parameters": _parameters,
    "constraints": lambda v, p: read_list(v, p, read_text, unique=True),
    "expected_outcome": _json_value,
    "actual_outcome": _json_value,
    "started_at": read_optional(_rfc3339),
    "ended_at": read_optional(_rfc3339),
    "usage": read_optional(_usage),
    "cost": read_optional(_cost),
    "model_parameters": _model_parameters,
    "chain": read_optional(_chain),
    "signature": read_optional(_signature),
}
# The value a member added after v1 takes in a record of an earlier version (which lacks it).
_LATER_DEFAULTS: Mapping[str, object] = {
    "started_at": None,
    "ended_at": None,
    "usage": None,
    "cost": None,
    "model_parameters": {},
    "chain": None,
    "signature": None,
}


def _kind(value: Json) -> str:
    if not isinstance(value, str) or value not in PAYLOAD_TYPES:
        raise InvalidRecordError("kind", f"unknown kind {value!r}; expected one of {[*KINDS]}")
    return value


def _payload(kind: str, value: Json, path: str) -> Payload:
    readers = _PAYLOAD_READERS[kind]
    obj = read_object(value, path, _PAYLOAD_NAMES[kind])
    paths = _PAYLOAD_PATHS[kind] if path == "payload" else {n: child_path(path, n) for n in obj}
    args = {name: read(obj[name], paths[name]) for name, read in readers.items()}
    payload: Payload = PAYLOAD_TYPES[kind](**args)  # type: ignore[assignment]
    return payload


def schema_version(value: object) -> int:
    """The version a record's ``schema`` member names (``ledger.decision/v<N>``).

    ``UnsupportedSchemaError`` for a version above ``SCHEMA_VERSION`` (a newer writer: the
    reader must be upgraded, the record is not thereby invalid); ``InvalidRecordError`` for
    anything that is not a schema name."""
    match = _SCHEMA_NAME.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidRecordError("schema", f"expected {SCHEMA_PREFIX}<N>, got {value!r}")
    version = int(match.group(1))
    if version > SCHEMA_VERSION:
        raise UnsupportedSchemaError(version, SCHEMA_VERSION)
    return version


def record_fields(version: int) -> tuple[str, ...]:
    """The members of a record of schema ``version`` (``FIELDS_SINCE``), in ``RECORD_FIELDS``
    order."""
    names = _FIELDS_OF.get(version)
    if names is None:
        names = tuple(name for name, since in FIELDS_SINCE.items() if since <= version)
    return names


_FIELDS_OF: dict[int, tuple[str, ...]] = {}
_FIELDS_OF.update((v, record_fields(v)) for v in range(1, SCHEMA_VERSION + 1))


def _record_args(value: Json) -> dict[str, Any]:
    """``_parse_record(value)``, through ``_parse_record_fast`` when it can read the record."""
    try:
        args = _parse_fast(value)
    except FormatError:  # refused: the plain reading names the problem as it always has
        args = None
    return _parse_record(value) if args is None else args


def _parse_record(value: Json) -> dict[str, Any]:
    """Validate a plain JSON record; return the constructor arguments (without ``kind``).

    The version is read first, so a newer record is reported as such, never as a record with
    unknown members."""
    version = SCHEMA_VERSION
    if isinstance(value, dict):
        if "schema" not in value:
            raise InvalidRecordError("schema", "missing required field")
        version = schema_version(value["schema"])
    names = record_fields(version)
    obj = read_object(value, "", names)
    kind = _kind(obj["kind"])
    args: dict[str, Any] = {"schema": obj["schema"]}
    for name, read in _FIELD_READERS.items():
        if name in obj:
            args[name] = read(obj[name], name)
    args.update((n, {} if d == {} else d) for n, d in _LATER_DEFAULTS.items() if n not in names)
    args["payload"] = _payload(kind, obj["payload"], "payload")
    return _checked_across(args, obj, version)


def _checked_across(args: dict[str, Any], obj: Json, version: int) -> dict[str, Any]:
    """``args`` after the checks across fields that both readings end with (the cross-field
    rules, and what a schema older than per-leaf commitments may not hold)."""
    _check_cross_field(args)
    if version < PER_LEAF_SINCE and (where := _first_per_leaf(obj, "")) is not None:
        raise InvalidRecordError(where, f"per-leaf commitments need schema v{PER_LEAF_SINCE}")
    reason = getattr(args["payload"], "reason", None)
    if version < PER_LEAF_SINCE and isinstance(reason, Commitment):
        raise InvalidRecordError("payload.reason", "a committed reason needs schema v2")
    return args


_VERSION_OF = {f"{SCHEMA_PREFIX}{v}": v for v in range(1, SCHEMA_VERSION + 1)}
_NAME_SETS = {v: frozenset(record_fields(v)) for v in range(1, SCHEMA_VERSION + 1)}
_MAX_INT = 2**53 - 1  # I-JSON's safe integers (``ledger.core.jcs.read_int``)
_PLAIN = (str, int, float, bool, type(None))  # exact JSON scalar types: kept as they are
_COSTS: dict[tuple[str, str], Cost] = {}  # valid costs (frozen: records share a few)
_USAGES: dict[tuple[int | None, ...], Usage] = {}  # valid token counts, likewise


def _parse_record_fast(value: Json) -> dict[str, Any] | None:
    """``_parse_record(value)`` for a record of the usual shape, read with fewer calls; None (or
    ``FormatError``) for anything else, which the plain reading then reads or refuses, naming
    the problem. As strict: each member is checked as its reader checks it, or by the reader
    itself (a property test holds both readings equal, members' types included)."""
    if type(value) is not dict:
        return None
    schema = value.get("schema")
    version = _VERSION_OF.get(schema) if type(schema) is str else None
    if version is None or value.keys() != _NAME_SETS[version]:
        return None
    kind, record_id, run_id = value["kind"], value["record_id"], value["run_id"]
    agent, step, model = value["agent"], value["step"], value["model"]
    if (
        type(kind) is not str
        or kind not in PAYLOAD_TYPES
        or type(record_id) is not str
        or _UUID7.fullmatch(record_id) is None
        or type(run_id) is not str
        or not run_id
        or type(agent) is not str
        or not agent
        or type(step) is not int
        or not 0 <= step <= _MAX_INT
        or not (model is None or (type(model) is str and model))
    ):
        return None
    selected = value["selected"]
    if not (selected is None or (type(selected) is str and selected)):
        return None
    otel = value["otel"]
    args: dict[str, Any] = {
        "schema": schema,
        "record_id": record_id,
        "run_id": run_id,
        "step": step,
        "parent_digests": _digests_fast(value["parent_digests"]),
        "time": _rfc3339(value["time"], "time"),
        "agent": agent,
        "model": model,
        "otel": None if otel is None else _otel_fast(otel),
        "evidence": _evidence_fast(value["evidence"]),
        "candidates": _empty_or(value["candidates"], "candidates"),
        "selected": selected,
        "parameters": _parameters_fast(value["parameters"]),
        "constraints": _empty_or(value["constraints"], "constraints"),
        "expected_outcome": _json_value(value["expected_outcome"], "expected_outcome"),
        "actual_outcome": _json_value(value["actual_outcome"], "actual_outcome"),
    }
    if version >= 2:
        started, ended, usage, cost = (
            value["started_at"], value["ended_at"], value["usage"], value["cost"],
        )  # fmt: skip
        args["started_at"] = None if started is None else _rfc3339(started, "started_at")
        args["ended_at"] = None if ended is None else _rfc3339(ended, "ended_at")
        args["usage"] = None if usage is None else _usage_fast(usage)
        args["cost"] = None if cost is None else _cost_fast(cost)
        parameters = value["model_parameters"]
        args["model_parameters"] = (
            {}
            if type(parameters) is dict and not parameters
            else _model_parameters(parameters, "model_parameters")
        )
    if version >= 3:
        chain, signature = value["chain"], value["signature"]
        args["chain"] = None if chain is None else _chain(chain, "chain")
        args["signature"] = None if signature is None else _signature(signature, "signature")
    if (
        args["parent_digests"] is None
        or (otel is not None and args["otel"] is None)
        or args["evidence"] is None
        or args["parameters"] is None
        or (version >= 2 and value["usage"] is not None and args["usage"] is None)
        or (version >= 2 and value["cost"] is not None and args["cost"] is None)
    ):
        return None
    if version < SCHEMA_VERSION:
        names = _FIELDS_OF[version]
        args.update((n, {} if d == {} else d) for n, d in _LATER_DEFAULTS.items() if n not in names)
    args["payload"] = _payload_fast(kind, value["payload"])
    return _checked_across(args, value, version)


def _empty_or(value: Json, name: str) -> Any:
    """``()`` for an empty array, else the member's own reader."""
    if type(value) is list and not value:
        return ()
    return _FIELD_READERS[name](value, name)


def _digests_fast(value: Json) -> tuple[str, ...] | None:
    """``_digests`` (unique SHA-256 hex digests) or None."""
    if type(value) is not list:
        return None
    for item in value:
        if type(item) is not str or _DIGEST.fullmatch(item) is None:
            return None
    if len(value) > 1 and len(set(value)) != len(value):
        return None
    return tuple(cast(list[str], value))


def _otel_fast(value: Json) -> OtelContext | None:
    if type(value) is not dict or len(value) != 2:
        return None
    trace_id, span_id = value.get("trace_id"), value.get("span_id")
    if (
        type(trace_id) is not str
        or _TRACE_ID.fullmatch(trace_id) is None
        or not trace_id.strip("0")
        or type(span_id) is not str
        or _SPAN_ID.fullmatch(span_id) is None
        or not span_id.strip("0")
    ):
        return None
    return OtelContext(trace_id=trace_id, span_id=span_id)


def _evidence_fast(value: Json) -> dict[str, str] | None:
    if type(value) is not dict or "" in value:
        return None
    for item in value.values():
        if type(item) is not str or _DIGEST.fullmatch(item) is None:
            return None
    return dict(cast(dict[str, str], value))


def _parameters_fast(value: Json) -> dict[str, JsonValue] | None:
    if type(value) is not dict or (len(value) == 1 and COMMITMENT_KEY in value):
        return None
    return {k: v if type(v) in _PLAIN else _json_value_at(v, None) for k, v in value.items()}


def _usage_fast(value: Json) -> Usage | None:
    if type(value) is not dict or len(value) != 3:
        return None
    if "input_tokens" not in value or "output_tokens" not in value or "total_tokens" not in value:
        return None
    counts = cast(
        tuple[int | None, int | None, int | None],
        (value["input_tokens"], value["output_tokens"], value["total_tokens"]),
    )
    for count in counts:  # exact types before the cache (``True == 1``, ``2.0 == 2``)
        if not (count is None or (type(count) is int and 0 <= count <= _MAX_INT)):
            return None
    found = _USAGES.get(counts)
    if found is None:
        if len(_USAGES) >= 4096:
            _USAGES.clear()
        found = _USAGES[counts] = Usage(
            input_tokens=counts[0], output_tokens=counts[1], total_tokens=counts[2]
        )
    return found


def _cost_fast(value: Json) -> Cost | None:
    if type(value) is not dict or len(value) != 2:
        return None
    amount, currency = value.get("amount"), value.get("currency")
    if type(amount) is not str or type(currency) is not str:
        return None
    found = _COSTS.get((amount, currency))
    if found is None:
        if _AMOUNT.fullmatch(amount) is None or _CURRENCY.fullmatch(currency) is None:
            return None
        if len(_COSTS) >= 4096:
            _COSTS.clear()
        found = _COSTS[amount, currency] = Cost(amount=amount, currency=currency)
    return found


_PAYLOADS: dict[tuple[object, ...], Payload] = {}  # small valid payloads (frozen: shared)


def _payload_fast(kind: str, value: Json) -> Payload:
    """``_payload(kind, value, "payload")``; the usual kinds with fewer calls. A tool call or
    parameter construction equal to one already read is that one (frozen: shared safely): its
    key holds the exact ``str`` values read (a string equals only a string) and is stored
    only once they were found valid."""
    if type(value) is dict:
        if kind == "tool_call" and len(value) == 3:
            tool, used, made = (
                value.get("tool"),
                value.get("inputs_used"),
                value.get("outputs_generated"),
            )
            if type(used) is list and type(made) is list and type(tool) is str:
                shared: tuple[object, ...] = (kind, tool, len(used), *used, *made)
                try:
                    found = _PAYLOADS.get(shared)
                except TypeError:  # an unhashable item: refused below, by the plain reading
                    found = None
                if found is not None:
                    return found
                used_ok, made_ok = _digests_fast(used), _digests_fast(made)
                if tool and used_ok is not None and made_ok is not None:
                    return _shared(
                        shared, ToolCall(tool=tool, inputs_used=used_ok, outputs_generated=made_ok)
                    )
        elif kind == "parameter_construction" and len(value) == 1:
            tool = value.get("tool")
            if type(tool) is str and tool:
                found = _PAYLOADS.get((kind, tool))
                return found or _shared((kind, tool), ParameterConstruction(tool=tool))
        elif kind == "memory_write" and len(value) == 4:
            key, source, label = value.get("key"), value.get("source"), value.get("trust_label")
            if (
                "value" in value
                and type(key) is str
                and key
                and type(source) is str
                and source
                and type(label) is str
                and label
            ):
                item = _json_value(value["value"], "payload.value")
                return MemoryWrite(key=key, value=item, source=source, trust_label=label)
        elif kind == "constraint_check" and len(value) == 2:
            constraint, passed = value.get("constraint_id"), value.get("passed")
            if type(constraint) is str and constraint and type(passed) is bool:
                shared = (kind, constraint, passed)  # ``passed`` a bool: True is not 1 here
                found = _PAYLOADS.get(shared)
                return found or _shared(
                    shared, ConstraintCheck(constraint_id=constraint, passed=passed)
                )
        elif kind == "run_closed" and len(value) == 1:
            steps = _run_steps_fast(value.get("steps"))
            if steps is not None:
                return RunClosed(steps=steps)
    return _payload(kind, value, "payload")


def _run_steps_fast(value: Json) -> tuple[RunStep, ...] | None:
    """``_run_steps`` (each a step and a digest, steps strictly increasing from 0 on) or None."""
    if type(value) is not list:
        return None
    steps: list[RunStep] = []
    last = -1
    for item in value:
        if type(item) is not dict or len(item) != 2:
            return None
        step, digest = item.get("step"), item.get("record_digest")
        if (
            type(step) is not int
            or not last < step <= _MAX_INT
            or type(digest) is not str
            or _DIGEST.fullmatch(digest) is None
        ):
            return None
        steps.append(RunStep(step=step, record_digest=digest))
        last = step
    return tuple(steps)


def _shared(key: tuple[object, ...], payload: Payload) -> Payload:
    if len(_PAYLOADS) >= 4096:
        _PAYLOADS.clear()
    _PAYLOADS[key] = payload
    return payload


def _record_fast(value: Json) -> DecisionRecord | None:
    """``_parse_record_fast(value)`` built into a record: the pure twin of the compiled
    ``ledger.core._recordread.record`` (None, or ``FormatError``, for what the plain reading
    must read or refuse)."""
    args = _parse_record_fast(value)
    return None if args is None else _built(args)


def _compiled_config() -> dict[str, Any]:
    """What the compiled fast reading takes from this module: the classes it builds, the
    caches it shares with the twin, and the twin's helpers it leaves every other case to."""
    return {
        "record": DecisionRecord,
        "otel": OtelContext,
        "usage": Usage,
        "cost": Cost,
        "commitment": Commitment,
        "tool_call": ToolCall,
        "parameter_construction": ParameterConstruction,
        "memory_write": MemoryWrite,
        "constraint_check": ConstraintCheck,
        "tool_selection": ToolSelection,
        "run_closed": RunClosed,
        "run_step": RunStep,
        "rfc3339": _rfc3339,
        "empty_or": _empty_or,
        "json_value": _json_value,
        "json_value_at": _json_value_at,
        "model_parameters": _model_parameters,
        "chain": _chain,
        "signature": _signature,
        "payload": _payload,
        "checked_across": _checked_across,
        "commitment_from": Commitment.from_json_obj,
        "payload_types": PAYLOAD_TYPES,
        "versions": _VERSION_OF,
        "fields_of": _FIELDS_OF,
        "times": _TIMES_SEEN,
        "usages": _USAGES,
        "costs": _COSTS,
        "payloads": _PAYLOADS,
        "format_error": FormatError,
        "setters": {f.name: getattr(DecisionRecord, f.name) for f in fields(DecisionRecord)},
        "cache_max": 4096,
        "parse_twin": _parse_record_fast,
        "record_twin": _record_fast,
    }


# The one selector (``ledger.core.accel``): the compiled fast reading when it is built, unless
# ``LEDGER_PURE=1``; else its twin above.
_parse_fast: Callable[[Json], dict[str, Any] | None] = _parse_record_fast
_read_fast: Callable[[Json], DecisionRecord | None] = _record_fast
if accel.record_configure is not None and accel.record_parse and accel.record_read:
    accel.record_configure(_compiled_config())
    _parse_fast, _read_fast = accel.record_parse, accel.record_read


def _first_per_leaf(value: Json, path: str) -> str | None:
    """The path of the first per-leaf (``sha256-tree:``) commitment in a plain record, if any."""
    if is_commitment_obj(value):
        text = value[COMMITMENT_KEY]
        return path if isinstance(text, str) and text.startswith("sha256-tree:") else None
    children: list[tuple[str, Json]] = []
    if isinstance(value, dict):
        children = [(child_path(path, k), v) for k, v in value.items()]
    elif isinstance(value, list):
        children = [(index_path(path, i), v) for i, v in enumerate(value)]
    for where, child in children:
        if (found := _first_per_leaf(child, where)) is not None:
            return found
    return None


def _check_cross_field(args: Mapping[str, Any]) -> None:
    candidates: tuple[Candidate, ...] = args["candidates"]
    ids = [c.id for c in candidates]
    if len(set(ids)) != len(ids):
        first = next(i for i, c in enumerate(ids) if ids.index(c) != i)
        raise InvalidRecordError(f"candidates[{first}].id", "duplicate candidate id")
    if args["selected"] is not None and args["selected"] not in ids:
        raise InvalidRecordError("selected", f"{args['selected']!r} is not a candidate id")
    payload = args["payload"]
    if isinstance(payload, ToolSelection) and not candidates:
        raise InvalidRecordError("candidates", "a tool_selection has at least one candidate")
    if args["chain"] is not None and args["step"] != 0:
        raise InvalidRecordError("chain", "only a run's first record (step 0) has a chain link")
    if isinstance(payload, RunClosed) and payload.steps and payload.steps[-1].step >= args["step"]:
        raise InvalidRecordError("step", "a run_closed record comes after every step it lists")
    started, ended = args["started_at"], args["ended_at"]
    if started is not None and ended is not None and _instant(ended) < _instant(started):
        raise InvalidRecordError("ended_at", f"{ended!r} is before started_at {started!r}")


def _instant(text: str) -> datetime:
    """An RFC 3339 date-time (already validated) as an aware datetime; a leap second counts as
    :59 of its minute."""
    match = _RFC3339.fullmatch(text)
    assert match is not None
    fraction = re.search(r"\.([0-9]+)", text)
    micros = int((fraction.group(1) + "000000")[:6]) if fraction else 0
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    sign = -1 if re.search(r"-[0-9]{2}:[0-9]{2}$", text) else 1
    off_h, off_m = (int(g or 0) for g in match.groups()[6:])
    zone = timezone(sign * timedelta(hours=off_h, minutes=off_m))
    return datetime(year, month, day, hour, minute, min(second, 59), micros, tzinfo=zone)


# --- digests, ids, disclosure --------------------------------------------------------------------


def record_digest(record: DecisionRecord) -> bytes:
    """SHA-256 of the record's RFC 8785 canonical bytes (32 bytes)."""
    return hashlib.sha256(canonical_plain(record.to_json_obj())).digest()  # to_json_obj checks


def record_digest_of_plain(plain: Json, *, exact: bool = False) -> bytes:
    """``record_digest(DecisionRecord.from_json_obj(plain))`` for a ``plain`` record that
    ``from_json_obj`` accepts (read by ``loads_strict(..., safe_numbers=True)``, or
    ``loads_exact``, whose second answer is ``exact``): reading and writing are exact inverses
    (module docstring), so its RFC 8785 bytes are the record's (a property test holds them
    equal, integral floats in integer members included)."""
    return hashlib.sha256(canonical_exact(plain, exact)).digest()


def new_record_id(now_ms: int | None = None, rand: bytes | None = None) -> str:
    """A UUIDv7 (RFC 9562 §5.7): 48-bit Unix milliseconds, version 7, variant 0b10, random rest.

    ``now_ms`` defaults to the wall clock and ``rand`` (10 bytes; the version nibble and variant
    bits are overwritten) to fresh random bytes; tests inject both.
    """
    ms = _time.time_ns() // 1_000_000 if now_ms is None else now_ms
    if not 0 <= ms < 2**48:
        raise InvalidRecordError("record_id", f"timestamp {ms} ms does not fit 48 bits")
    rand = secrets.token_bytes(10) if rand is None else rand
    if len(rand) != 10:
        raise InvalidRecordError("record_id", "rand must be exactly 10 bytes")
    raw = bytearray(ms.to_bytes(6, "big") + rand)
    raw[6] = 0x70 | (raw[6] & 0x0F)
    raw[8] = 0x80 | (raw[8] & 0x3F)
    return str(uuid.UUID(bytes=bytes(raw)))


def uuid7_time_ms(record_id: str) -> int:
    """The Unix-millisecond timestamp in a UUIDv7 (RFC 9562 §5.7 ``unix_ts_ms``)."""
    _record_id(record_id, "record_id")
    return int(record_id.replace("-", "")[:12], 16)


def verify_disclosure(
    record: DecisionRecord | Mapping[str, object] | str | bytes,
    disclosure: AnyDisclosure | Kept,
    expected_record_digest: bytes,
) -> None:
    """Check a disclosed field against a logged record digest.

    ``record`` is the record, its JSON object or its JSON text. Checks that the record's digest
    is ``expected_record_digest`` and that ``disclosure`` opens the commitment at its field path
    (``ledger.records.commitments.check_disclosure_in``: a whole field, one leaf, or a kept
    per-leaf secret). Raises ``RecordError`` on any mismatch, ``InvalidRecordError``
    if the record is malformed, ``MalformedHashError`` if the expected digest is not 32 bytes.
    """
    if len(expected_record_digest) != HASH_SIZE:
        raise MalformedHashError("expected record digest must be 32 bytes")
    if isinstance(record, str | bytes):
        record = DecisionRecord.from_json(record)
    elif not isinstance(record, DecisionRecord):
        record = DecisionRecord.from_json_obj(record)
    digest = record_digest(record)
    if digest != expected_record_digest:
        raise RecordError(
            f"record digest {digest.hex()} does not match expected {expected_record_digest.hex()}"
        )
    check_disclosure_in(record.to_json_obj(), disclosure)
