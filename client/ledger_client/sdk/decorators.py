"""``@decision``: each call of a function (sync or async) becomes one decision record.

docs/design.md "Decision record (v1)". The record goes to the run that is current where the function
is called (``ledger_client.sdk.context``): its step is the next of the run, its parents are the
records the call depended on (those emitted inside it, else the caller's previous ones).

* Arguments and result (``capture``, see ``ledger_client.sdk.capture``): ``"commit"`` (default)
  puts salted commitments in ``parameters`` (one per argument) and ``actual_outcome`` (no
  plain digests), and the SDK keeps the disclosures (clear value and salt) privately;
  ``"digest"`` puts ``evidence = {"arguments": <digest>, "result": <digest>}`` and nothing
  else: unsalted, so a low-entropy value ("yes", a small number, an e-mail address from a
  known list) can be guessed from its digest; ``"content"`` puts the values in clear.
* Parents (``ledger_client.sdk.links``): ``parents=`` (a list of records, receipts, digests or
  tracked values, or a callable taking the bound arguments and returning one), the records
  whose returned mutable values are among the arguments, the parents ``derived_from`` named
  for an argument, and the outputs an argument contains by content (``content-match``,
  labelled in ``evidence`` as inferred: ``ledger.records.links``); the call's result is
  tracked in turn.
* ``derived_from(value, *parents)`` declares that ``value`` was computed from ``parents``
  (records, receipts, digests, tracked values) and returns it unchanged: a mutable value
  keeps the link for the rest of the run; any other (a number, a boolean, a string) links the
  next decorated call made in the same context that receives it (an equal value of the same
  type, or one level inside a container).
* Inside an active OpenTelemetry span (``opentelemetry`` already imported by the application),
  the record's ``otel`` holds that span's trace and span ids unless ``otel=`` is given.
* ``kind`` chooses the payload. Fields it needs are taken from the keyword arguments of
  ``decision`` or derived: ``tool_call`` (tool = the function's name, inputs used = the
  arguments' digest, outputs generated = the result's), ``parameter_construction`` (tool),
  ``constraint_check`` (constraint_id = name, passed = ``bool(result)``), ``termination``
  (reason = the result if it is a string, else the name), ``handoff`` (to_agent = the result
  if a string), ``plan`` (steps = the result if a list of strings), ``memory_write`` (key =
  name, value = the captured result, source = ``function:<name>``; ``trust_label`` must be
  given), ``tool_selection`` (``candidates`` must be given), ``outcome``.
* Keyword arguments may be payload fields or record fields (``model``, ``otel``, ``evidence``,
  ``candidates``, ``selected``, ``parameters``, ``constraints``, ``expected_outcome``,
  ``actual_outcome``, ``usage``, ``cost``, ``model_parameters``); a callable value is called
  with the result (``passed=bool``, ``candidates=lambda r: ...``, ``usage=lambda r:
  Usage(...)``). ``started_at``/``ended_at`` are the call's start and end (the run's clock).
* An exception (``asyncio.CancelledError`` included) becomes an ``outcome`` record with
  ``actual_outcome = {"error": <type>, "decision": <kind>, "name": <name>}`` (the message is
  left out: it may hold data) and the arguments' evidence; then it propagates.
* Field classification (``ledger_client.sdk.classify``, docs/formats.md "Field
  classification"): besides arguments and result, a termination reason, plan steps, candidate
  actions, expected and actual outcomes and memory values are committed, whether derived or
  given; ``clear=("payload.reason", "parameters.city", ...)`` keeps the named ones in clear
  (``capture="content"`` keeps everything in clear). A failure's ``{"error": <type>}`` is a
  status and stays in clear.
* Outside any run the function runs unrecorded and ``UnrecordedDecisionWarning`` is issued.
"""

from __future__ import annotations

import functools
import inspect
import logging
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from ledger.records.commitments import Kept
from ledger.records.decision import KINDS, PAYLOAD_FIELDS, PAYLOAD_TYPES, Outcome, Payload
from ledger.records.links import derived_by_evidence
from ledger_client.sdk.capture import Capture, CapturedValue, capture_arguments, capture_value
from ledger_client.sdk.classify import ALL, Clear, clear_names
from ledger_client.sdk.context import Frame, current_frame, enter_frame, error_name, leave_frame
from ledger_client.sdk.errors import ClientError
from ledger_client.sdk.links import (
    ParentsSpec,
    parent_digests,
    pending_derived,
    take_derived,
    trackable,
)
from ledger_client.sdk.otel_span import current_otel

__all__ = ["RECORD_FIELDS", "UnrecordedDecisionWarning", "decision", "derived_from"]
_V = TypeVar("_V")

_log = logging.getLogger("ledger_client.decorators")
_F = TypeVar("_F", bound=Callable[..., Any])

RECORD_FIELDS = (
    "model", "otel", "evidence", "candidates", "selected", "parameters", "constraints",
    "expected_outcome", "actual_outcome", "usage", "cost", "model_parameters",
)  # fmt: skip
_REQUIRED = {"memory_write": ("trust_label",), "tool_selection": ("candidates",)}


class UnrecordedDecisionWarning(RuntimeWarning):
    """A decorated function ran where no ledger run is open: nothing was recorded."""


@dataclass(frozen=True, slots=True)
class _Spec:
    kind: str
    name: str | None
    capture: Capture
    parents: ParentsSpec
    payload_fields: Mapping[str, Any]
    record_fields: Mapping[str, Any]
    clear: Clear = ()

    def clear_for(self, *also: str) -> Clear:
        """What stays in clear: everything with ``capture="content"``, else ``clear=`` and
        ``also`` (with ``"digest"`` the memory value, which is then a digest)."""
        if self.capture is Capture.CONTENT or self.clear == ALL:
            return ALL
        digest = ("payload.value",) if self.capture is Capture.DIGEST else ()
        return (*self.clear, *also, *digest)


def _spec(
    kind: str,
    name: str | None,
    capture: str,
    parents: ParentsSpec,
    fields: Mapping[str, Any],
    clear: Clear = (),
) -> _Spec:
    if kind not in KINDS or kind == "run_closed":
        raise ValueError(f"kind {kind!r}: want one of {[k for k in KINDS if k != 'run_closed']}")
    payload_names = PAYLOAD_FIELDS[kind]
    unknown = [n for n in fields if n not in payload_names and n not in RECORD_FIELDS]
    if unknown:
        raise TypeError(f"@decision(kind={kind!r}): unknown fields {unknown}")
    missing = [n for n in _REQUIRED.get(kind, ()) if n not in fields]
    if missing:
        raise TypeError(f"@decision(kind={kind!r}) needs {', '.join(f'{n}=...' for n in missing)}")
    return _Spec(
        kind=kind,
        name=name,
        capture=Capture(capture),
        parents=parents,
        payload_fields={k: v for k, v in fields.items() if k in payload_names},
        record_fields={k: v for k, v in fields.items() if k in RECORD_FIELDS},
        clear=clear_names(clear),
    )


def _resolve(fields: Mapping[str, Any], result: object) -> dict[str, Any]:
    return {k: v(result) if callable(v) else v for k, v in fields.items()}


def _derived(kind: str, label: str, args_digest: str, result: object, out: CapturedValue) -> Any:
    text = result if isinstance(result, str) and result else None
    if kind == "tool_call":
        return {"tool": label, "inputs_used": (args_digest,), "outputs_generated": (out.digest,)}
    if kind == "parameter_construction":
        return {"tool": label}
    if kind == "constraint_check":
        return {"constraint_id": label, "passed": bool(result)}
    if kind == "termination":
        return {"reason": text or label}
    if kind == "handoff":
        return {"to_agent": text} if text else {}
    if kind == "memory_write":
        value = out.value if out.value is not None else f"sha256:{out.digest}"
        return {"key": label, "value": value, "source": f"function:{label}"}
    if kind == "plan" and isinstance(result, list | tuple) and result:
        return {"steps": tuple(result)}
    return {}


class _Call:
    """One decorated call: a child frame made current, then the record that closes it."""

    def __init__(self, spec: _Spec, label: str, frame: Frame, arguments: Mapping[str, Any]):
        self.spec, self.label = spec, label
        self.run = frame.run
        self.started_at = self.run.now()
        self.inferred: tuple[str, ...] = ()
        self.frame = self.run.child(frame, inputs=self._inputs(arguments))
        every = spec.clear == ALL
        self.args_digest, self.parameters, self.disclosures = capture_arguments(
            arguments, Capture.CONTENT if every else spec.capture, () if every else spec.clear
        )
        self._token = enter_frame(self.frame)

    def _inputs(self, arguments: Mapping[str, Any]) -> tuple[str, ...]:
        given = self.spec.parents
        named = given(arguments) if callable(given) else given or ()
        values = self.run.values
        found = values.found_in(arguments)
        declared = parent_digests([*named, *found, *take_derived(arguments)], values)
        matched = values.content_matches(arguments)
        self.inferred = tuple(d for d in matched if d not in declared)
        return (*declared, *self.inferred)

    def _evidence(self, result_digest: str | None) -> dict[str, str]:
        labels = derived_by_evidence(self.inferred)
        if self.spec.capture is Capture.COMMIT:
            return labels
        if result_digest is None:
            return {"arguments": self.args_digest, **labels}
        return {"arguments": self.args_digest, "result": result_digest, **labels}

    def succeed(self, result: object) -> None:
        leave_frame(self._token)
        spec = self.spec
        path = "payload.value" if spec.kind == "memory_write" else "actual_outcome"
        mode = Capture.CONTENT if spec.clear == ALL or path in spec.clear else spec.capture
        out = capture_value(result, mode, path)
        args = _derived(spec.kind, self.label, self.args_digest, result, out)
        args.update(_resolve(spec.payload_fields, result))
        try:
            payload = cast(Payload, PAYLOAD_TYPES[spec.kind](**args))
        except TypeError as exc:
            raise TypeError(f"@decision(kind={spec.kind!r}) on {self.label}: {exc}") from None
        fields = self._record_fields(result, out, path)
        disclosures: list[Kept] = [*self.disclosures]
        if out.disclosure is not None:
            disclosures.append(out.disclosure)
        entry = self.run.finish(
            self.frame, payload, disclosures=disclosures, clear=spec.clear_for(), **fields
        )
        self.run.values.track(result, entry.digest.hex(), entry.record.parent_digests)

    def _record_fields(self, result: object, out: CapturedValue, path: str) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "parameters": self.parameters,
            "started_at": self.started_at,
            "ended_at": self.run.now(),
        }
        if path == "actual_outcome" and out.value is not None:
            fields["actual_outcome"] = out.value
        user = _resolve(self.spec.record_fields, result)
        if "otel" not in user and (span := current_otel()) is not None:
            user["otel"] = span
        evidence = {**self._evidence(out.digest), **user.pop("evidence", {})}
        return {**fields, **user, "evidence": evidence}

    def fail(self, exc: BaseException) -> None:
        leave_frame(self._token)
        outcome = {"error": error_name(exc), "decision": self.spec.kind, "name": self.label}
        try:
            self.run.finish(
                self.frame,
                Outcome(),
                disclosures=self.disclosures,
                evidence=self._evidence(None),
                parameters=self.parameters,
                actual_outcome=outcome,
                started_at=self.started_at,
                ended_at=self.run.now(),
                clear=self.spec.clear_for("actual_outcome"),  # the error's type: a status
                **({"otel": span} if (span := current_otel()) is not None else {}),
            )
        except ClientError:
            _log.exception("could not record the failure of %s", self.label)


def _begin(spec: _Spec, label: str, sig: inspect.Signature, args: Any, kwargs: Any) -> _Call | None:
    frame = current_frame()
    if frame is None:
        message = f"@decision {label}: no ledger run is open; the call is not recorded"
        warnings.warn(message, UnrecordedDecisionWarning, stacklevel=3)
        return None
    return _Call(spec, label, frame, _arguments(sig, args, kwargs))


def _arguments(sig: inspect.Signature, args: Any, kwargs: Any) -> dict[str, Any]:
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return {"args": list(args), "kwargs": dict(kwargs)}
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    first = next(iter(sig.parameters), None)
    if first in ("self", "cls"):
        arguments.pop(first)
    return arguments


def derived_from(value: _V, *parents: object) -> _V:
    """Declare that ``value`` was computed from ``parents`` (module docstring); returns it.

    Outside any run it does nothing. A parent that names no record raises ``TypeError``."""
    frame = current_frame()
    if frame is None:
        return value
    values = frame.run.values
    digests = parent_digests(parents, values)
    if trackable(value):
        values.derive(value, (*values.digests_of(value), *digests))
    else:
        pending_derived(value, digests)
    return value


def decision(
    kind: str = "tool_call",
    *,
    name: str | None = None,
    capture: str = "commit",
    parents: ParentsSpec = None,
    clear: Clear = (),
    **fields: Any,
) -> Callable[[_F], _F]:
    """Record each call of the decorated function as a ``kind`` decision (module docstring)."""
    spec = _spec(kind, name, capture, parents, fields, clear)

    def wrap(fn: _F) -> _F:
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            raise TypeError(f"@decision cannot wrap the generator function {fn.__qualname__}")
        label = spec.name or fn.__qualname__
        sig = inspect.signature(fn)
        if inspect.iscoroutinefunction(fn):
            return cast(_F, _async_wrapper(fn, spec, label, sig))
        return cast(_F, _sync_wrapper(fn, spec, label, sig))

    return wrap


def _sync_wrapper(
    fn: Callable[..., Any], spec: _Spec, label: str, sig: inspect.Signature
) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = _begin(spec, label, sig, args, kwargs)
        if call is None:
            return fn(*args, **kwargs)
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            call.fail(exc)
            raise
        call.succeed(result)
        return result

    return wrapper


def _async_wrapper(
    fn: Callable[..., Any], spec: _Spec, label: str, sig: inspect.Signature
) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        call = _begin(spec, label, sig, args, kwargs)
        if call is None:
            return await fn(*args, **kwargs)
        try:
            result = await fn(*args, **kwargs)
        except BaseException as exc:
            call.fail(exc)
            raise
        call.succeed(result)
        return result

    return wrapper
