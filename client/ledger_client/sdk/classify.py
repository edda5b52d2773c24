"""The field classification (docs/formats.md "Field classification"), applied to every record.

One rule for the SDK, both bridges and every record kind: ``Run`` applies ``classify`` to each
record it emits, so ``emit``, ``@decision``, the LangChain and OpenTelemetry bridges and the
run's own records all go through it.

* In clear: kind, step, run, times, tool name, model id and parameters, token counts, cost,
  candidate ids, scores and ranks, outcome status (``passed``, constraint ids), memory keys,
  sources and trust labels, digests.
* Committed unless marked clear (``COMMITTED``): ``payload.reason`` (termination),
  ``payload.steps`` (plan text), ``candidates[].action`` (candidate descriptions), each value
  of ``parameters``, ``expected_outcome``, ``actual_outcome`` and ``payload.value`` (memory
  contents). A value already committed is left alone; any other is replaced by a salted
  commitment (``ledger_client.sdk.capture.capture_value``: objects and arrays leaf by leaf) and
  its disclosure kept with the record's others.
* ``clear`` marks what stays in clear: ``ALL`` (``capture="content"``), or names from
  ``COMMITTED`` (``"payload.reason"``, ``"candidates"``, ``"actual_outcome"``...) and single
  parameters (``"parameters.<name>"``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any, Final

from ledger.core.jcs import child_path, index_path
from ledger.records.commitments import Commitment, Kept
from ledger.records.decision import Candidate, MemoryWrite, Payload, Plan, Termination
from ledger_client.sdk.capture import Capture, capture_value

__all__ = ["ALL", "COMMITTED", "Clear", "classify", "clear_names"]

COMMITTED: Final = (
    "payload.reason",
    "payload.steps",
    "candidates",
    "parameters",
    "expected_outcome",
    "actual_outcome",
    "payload.value",
)
ALL: Final = "*"
Clear = Collection[str] | str  # ALL, or names from COMMITTED / "parameters.<name>"


def clear_names(clear: Clear) -> frozenset[str] | str:
    """Check and normalise a ``clear=`` argument (``ValueError`` naming an unknown entry)."""
    if clear == ALL:
        return ALL
    if isinstance(clear, str):
        clear = (clear,)
    names = frozenset(clear)
    unknown = [n for n in sorted(names) if n not in COMMITTED and not n.startswith("parameters.")]
    if unknown:
        raise ValueError(f"clear={unknown[0]!r}: want {ALL!r} or names from {list(COMMITTED)}")
    return names


def _kept_clear(clear: frozenset[str] | str, path: str) -> bool:
    if clear == ALL:
        return True
    return any(path == name or path.startswith((f"{name}.", f"{name}[")) for name in clear)


class _Committer:
    def __init__(self, clear: frozenset[str] | str) -> None:
        self.clear = clear
        self.disclosures: list[Kept] = []

    def value(self, value: Any, path: str) -> Any:
        if isinstance(value, Commitment) or value is None or _kept_clear(self.clear, path):
            return value
        captured = capture_value(value, Capture.COMMIT, path)
        assert captured.disclosure is not None
        self.disclosures.append(captured.disclosure)
        return captured.value


def classify(
    payload: Payload, fields: Mapping[str, Any], clear: Clear = ()
) -> tuple[Payload, dict[str, Any], list[Kept]]:
    """``payload`` and record ``fields`` with every committed-class value not marked clear
    replaced by a commitment, and the disclosures that open them."""
    commit = _Committer(clear_names(clear))
    out = dict(fields)
    if isinstance(payload, Termination):
        payload = replace(payload, reason=commit.value(payload.reason, "payload.reason"))
    elif isinstance(payload, Plan):
        steps = tuple(
            commit.value(s, index_path("payload.steps", i)) for i, s in enumerate(payload.steps)
        )
        payload = replace(payload, steps=steps)
    elif isinstance(payload, MemoryWrite):
        payload = replace(payload, value=commit.value(payload.value, "payload.value"))
    candidates = out.get("candidates")
    if candidates:
        out["candidates"] = tuple(
            replace(c, action=commit.value(c.action, f"candidates[{i}].action"))
            if isinstance(c, Candidate)
            else c
            for i, c in enumerate(candidates)
        )
    parameters = out.get("parameters")
    if isinstance(parameters, Mapping):
        out["parameters"] = {
            k: commit.value(v, child_path("parameters", k)) for k, v in parameters.items()
        }
    for name in ("expected_outcome", "actual_outcome"):
        if name in out:
            out[name] = commit.value(out[name], name)
    return payload, out, commit.disclosures
