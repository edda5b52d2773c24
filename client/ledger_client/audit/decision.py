"""What a record decided, as every auditor's view shows it: candidates, selection, outcome.

Pure: no I/O. docs/auditing.md "What a record decided". ``decision_of(record, opened)`` reads
one record and returns a ``Decision``: the model and agent, the candidates (id, action, score,
rank, and which one was selected) ordered by rank, the selected option and why (a reason the
record gives, else what its rank and score say: ``top-ranked (rank 1, score 0.91) of 3``), the
expected and actual outcome and the outcome status (``met``, ``not met``, ``error:<type>``,
``passed``/``failed`` for a constraint check, the ``status`` member of an outcome object or a
short outcome string, such as ``schema_mismatch``), the evidence digests, PROV inputs and
outputs, parameters, and the capture fields (start and end time, duration, tokens, cost,
model parameters) where the record carries them.

Committed values (``{"commitment": "sha256:..."}``) are shown as ``committed`` with their
commitment; their content only when ``opened`` (field path -> value, from a disclosures file
the caller has checked against the record with ``check_disclosure_in``, or the receipt's own
disclosures) opens that field, and then marked ``disclosed``. A comparison of expected and
actual outcome over a committed, unopened value is ``committed`` (not known), never ``met``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ledger.core.jcs import Json, child_path, index_path
from ledger.core.timefmt import parse_rfc3339
from ledger.records.commitments import COMMITMENT_KEY, is_commitment_obj
from ledger.records.decision import DecisionRecord

__all__ = [
    "COMMITTED",
    "Decision",
    "decision_of",
    "outcome_status",
    "plain_strings",
    "shown_text",
    "tags_of",
    "usage_of",
]

COMMITTED = "committed"
_REASON_KEYS = ("reason", "rationale", "why")
_SHORT = 64  # an outcome string this short or shorter is its own status
# The capture fields of schema v2 (docs/formats.md "Version 2 members"): when the step ran,
# its token counts and cost, the model's parameters.
_CAPTURE = ("started_at", "ended_at", "usage", "cost", "model_parameters")


def _open(value: Json, path: str, opened: Mapping[str, Json]) -> Json:
    """``value`` with every commitment replaced by ``{"committed": ..., "disclosed": v}``
    (when ``opened`` holds its path) or ``{"committed": "sha256:..."}``."""
    if is_commitment_obj(value):
        shown: dict[str, Json] = {COMMITTED: value[COMMITMENT_KEY]}  # type: ignore[dict-item]
        if path in opened:
            shown["disclosed"] = opened[path]
        return shown
    if isinstance(value, dict):
        return {k: _open(v, child_path(path, k), opened) for k, v in value.items()}
    if isinstance(value, list):
        return [_open(v, index_path(path, i), opened) for i, v in enumerate(value)]
    return value


def _is_closed(value: Json) -> bool:
    if isinstance(value, dict):
        if set(value) == {COMMITTED}:
            return True
        return any(_is_closed(v) for v in value.values())
    if isinstance(value, list):
        return any(_is_closed(v) for v in value)
    return False


def _plain(value: Json) -> Json:
    """A shown value with disclosed commitments replaced by their content."""
    if isinstance(value, dict):
        if COMMITTED in value and "disclosed" in value and len(value) == 2:
            return value["disclosed"]
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def shown_text(value: Json, limit: int = 80) -> str:
    """A shown value in a few words: ``committed``, ``"text" (disclosed)``, JSON otherwise."""
    if value is None:
        return "-"
    if isinstance(value, dict) and COMMITTED in value and len(value) <= 2:
        if "disclosed" not in value:
            return COMMITTED
        return _clip(json.dumps(value["disclosed"], ensure_ascii=False), limit) + " (disclosed)"
    return _clip(json.dumps(_display(value), ensure_ascii=False, sort_keys=True), limit)


def _display(value: Json) -> Json:
    """Unopened commitments as ``"committed"``, opened ones as their content."""
    if isinstance(value, dict):
        if COMMITTED in value and set(value) <= {COMMITTED, "disclosed"}:
            return value.get("disclosed", COMMITTED)
        return {k: _display(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_display(v) for v in value]
    return value


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def outcome_status(record: DecisionRecord, expected: Json, actual: Json) -> str | None:
    """The outcome status of a record (module docstring); None when it records no outcome."""
    if record.kind == "constraint_check":
        return "passed" if getattr(record.payload, "passed", False) else "failed"
    if isinstance(actual, dict) and isinstance(actual.get("error"), str):
        return f"error:{actual['error']}"
    if isinstance(actual, dict) and isinstance(actual.get("status"), str):
        return str(actual["status"])
    if actual is None:
        return None
    if _is_closed(actual) or (expected is not None and _is_closed(expected)):
        return COMMITTED
    if expected is not None:
        return "met" if _plain(expected) == _plain(actual) else "not met"
    if isinstance(actual, str) and 0 < len(actual) <= _SHORT:
        return actual
    return None


def _ms(text: object) -> int | None:
    if not isinstance(text, str):
        return None
    try:
        moment: datetime = parse_rfc3339(text)
    except ValueError:
        return None
    return int(moment.timestamp() * 1000)


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What one record decided (module docstring); ``to_json_obj`` is the ``--json`` form."""

    model: str | None
    candidates: tuple[dict[str, Json], ...]
    selected: str | None
    why: str | None
    expected: Json
    actual: Json
    status: str | None
    evidence: Mapping[str, str]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    parameters: Mapping[str, Json]
    capture: Mapping[str, Json] = field(default_factory=dict)

    @property
    def duration_ms(self) -> int | None:
        start, end = _ms(self.capture.get("started_at")), _ms(self.capture.get("ended_at"))
        return end - start if start is not None and end is not None else None

    @property
    def tokens(self) -> int | None:
        usage = self.capture.get("usage")
        if not isinstance(usage, dict):
            return None
        total = usage.get("total_tokens")
        if isinstance(total, int):
            return total
        parts = [usage.get(k) for k in ("input_tokens", "output_tokens")]
        counted = [p for p in parts if isinstance(p, int)]
        return sum(counted) if counted else None

    @property
    def cost(self) -> str | None:
        """``0.0042 USD``, or None."""
        cost = self.capture.get("cost")
        if not isinstance(cost, dict):
            return None
        return f"{cost.get('amount')} {cost.get('currency')}"

    def to_json_obj(self) -> dict[str, Json]:
        return {
            "model": self.model,
            "candidates": list(self.candidates),
            "selected": self.selected,
            "why": self.why,
            "expected_outcome": self.expected,
            "actual_outcome": self.actual,
            "outcome_status": self.status,
            "evidence": dict(self.evidence),
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "parameters": dict(self.parameters),
            "duration_ms": self.duration_ms,
            "tokens": self.tokens,
            "cost": self.cost,
            "capture": dict(self.capture),
        }

    def lines(self) -> list[str]:
        """The decision in a few text lines (only what the record carries)."""
        out = []
        if self.model:
            out.append(f"model {self.model}")
        for c in self.candidates:
            mark = "*" if c["selected"] else " "
            out.append(
                f"{mark} candidate {c['id']} rank {c['rank']} score {c['score']}: "
                f"{shown_text(c['action'], 50)}"
            )
        if self.selected is not None:
            out.append(f"selected {self.selected}" + (f" ({self.why})" if self.why else ""))
        if self.expected is not None:
            out.append(f"expected {shown_text(self.expected)}")
        if self.actual is not None:
            out.append(f"actual {shown_text(self.actual)}")
        if self.status is not None:
            out.append(f"outcome status {self.status}")
        out += [f"evidence {name} {digest[:16]}" for name, digest in sorted(self.evidence.items())]
        out += [f"input {d[:16]}" for d in self.inputs] + [f"output {d[:16]}" for d in self.outputs]
        out += [f"parameter {k} = {shown_text(v, 50)}" for k, v in sorted(self.parameters.items())]
        usage = [
            f"{name} {value}"
            for name, value in (
                ("duration", None if self.duration_ms is None else f"{self.duration_ms} ms"),
                ("tokens", self.tokens),
                ("cost", self.cost),
            )
            if value is not None
        ]
        if usage:
            out.append(", ".join(usage))
        model = self.capture.get("model_parameters")
        if isinstance(model, dict) and model:
            shown = ", ".join(f"{k}={shown_text(v, 30)}" for k, v in sorted(model.items()))
            out.append(f"model parameters {shown}")
        return out


def _why(record: DecisionRecord, candidates: list[dict[str, Json]], obj: dict[str, Any]) -> str:
    for source in (obj.get("parameters") or {}, obj.get("payload") or {}):
        for key in _REASON_KEYS:
            if isinstance(source.get(key), str | dict):
                return shown_text(source[key], 120)
    chosen = next((c for c in candidates if c["selected"]), None)
    if chosen is None:
        return f"not among the {len(candidates)} candidates" if candidates else ""
    top = min(int(str(c["rank"])) for c in candidates)
    where = "top-ranked" if chosen["rank"] == top else "not the top-ranked"
    return f"{where} (rank {chosen['rank']}, score {chosen['score']}) of {len(candidates)}"


def _json(value: object) -> Json:
    """A record member as JSON (commitments and v2 objects in their record form); the record
    is valid already, so nothing is checked again."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    convert = getattr(value, "to_json_obj", None)
    if callable(convert):
        return _json(convert())
    raise TypeError(f"{type(value).__name__} is not a record value")


def _shown(value: object) -> Json:
    """``_open(_json(value), path, {})`` in one pass: with nothing opened no field path is
    needed (the report shows thousands of records)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        if len(value) == 1:
            ((key, inner),) = value.items()
            if str(key) == COMMITMENT_KEY:
                return {COMMITTED: _json(inner)}
        return {str(k): _shown(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_shown(v) for v in value]
    convert = getattr(value, "to_json_obj", None)
    if callable(convert):
        return _shown(convert())
    raise TypeError(f"{type(value).__name__} is not a record value")


_SHOWN = ("candidates", "parameters", "expected_outcome", "actual_outcome", "payload", *_CAPTURE)


def decision_of(record: DecisionRecord, opened: Mapping[str, Json] | None = None) -> Decision:
    """What ``record`` decided (module docstring); ``opened``: field path -> checked value."""
    if opened:
        obj: dict[str, Any] = {
            name: _open(_json(getattr(record, name, None)), name, opened) for name in _SHOWN
        }
    else:
        obj = {name: _shown(getattr(record, name, None)) for name in _SHOWN}
    candidates = sorted(
        (
            {
                "id": c["id"],
                "action": c["action"],
                "score": c["score"],
                "rank": c["rank"],
                "selected": c["id"] == record.selected,
            }
            for c in obj.get("candidates") or []
        ),
        key=lambda c: (c["rank"], str(c["id"])),
    )
    payload = obj.get("payload") or {}
    expected, actual = obj.get("expected_outcome"), obj.get("actual_outcome")
    capture = {k: obj[k] for k in _CAPTURE if obj.get(k) not in (None, {})}
    why = _why(record, candidates, obj) if record.selected is not None else None
    return Decision(
        model=record.model,
        candidates=tuple(candidates),
        selected=record.selected,
        why=why or None,
        expected=expected,
        actual=actual,
        status=outcome_status(record, expected, actual),
        evidence=dict(record.evidence),
        inputs=tuple(payload.get("inputs_used") or ()),
        outputs=tuple(payload.get("outputs_generated") or ()),
        parameters=obj.get("parameters") or {},
        capture=capture,
    )


def usage_of(
    record: DecisionRecord,
) -> tuple[int | None, float | None, str | None, int | None]:
    """(tokens, cost amount, cost currency, duration in ms) from the record's v2 capture
    fields, None where absent."""
    usage = getattr(record, "usage", None)
    tokens = None
    if usage is not None:
        tokens = usage.total_tokens
        if tokens is None and (usage.input_tokens, usage.output_tokens) != (None, None):
            tokens = (usage.input_tokens or 0) + (usage.output_tokens or 0)
    cost = getattr(record, "cost", None)
    started, ended = getattr(record, "started_at", None), getattr(record, "ended_at", None)
    duration = None
    if started is not None and ended is not None:  # ``_ms(None)`` is None
        start, end = _ms(started), _ms(ended)
        duration = end - start if start is not None and end is not None else None
    amount = float(cost.amount) if cost is not None else None
    return tokens, amount, cost.currency if cost is not None else None, duration


def tags_of(record: DecisionRecord) -> list[str]:
    """The record's tags: its ``tags`` field where the schema has one, else the ``tags``
    parameter (a list of strings)."""
    tags = getattr(record, "tags", None)
    if tags is None:
        tags = record.parameters.get("tags")
    if isinstance(tags, list | tuple):
        return [t for t in tags if isinstance(t, str)]
    return []


def plain_strings(value: object) -> list[str]:
    """Every string inside a record value, commitments left out (they hide their content)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in plain_strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in plain_strings(v)]
    return []
