"""OpenTelemetry bridge: a span processor that turns GenAI tool, LLM, agent and memory spans into
decision records, keeping the W3C trace and span ids as the join key (``otel``). Needs
``opentelemetry-sdk``. docs/design.md "Decision record (v1)"; attribute names follow the
OpenTelemetry GenAI semantic conventions (``gen_ai.*``).

    provider.add_span_processor(LedgerSpanProcessor())   # records go to the current ledger_run

Mapping, by ``ledger.kind`` if the span sets it, else by ``gen_ai.operation.name``:

=============================  =================================================================
span                           record
=============================  =================================================================
``execute_tool``               ``tool_call``: tool = ``gen_ai.tool.name`` (else the span name);
                               inputs used / outputs generated = digests of
                               ``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result``
``chat``, ``text_completion``,  ``tool_selection`` when ``gen_ai.output.messages`` holds
``generate_content``           ``tool_call`` parts (a candidate each, score "1", the first
                               selected), else ``outcome`` (``{"finish_reasons": [...]}``);
                               model = ``gen_ai.response.model`` or ``gen_ai.request.model``;
                               evidence: digests of the input and output messages; ``usage``
                               from ``gen_ai.usage.*``, ``model_parameters`` from
                               ``gen_ai.request.*``, ``cost`` from ``ledger.cost.*``
``invoke_agent``               ``handoff`` to ``gen_ai.agent.name`` (else the span name)
``ledger.memory.key`` set      ``memory_write``: key, value (captured ``ledger.memory.value``),
(or ``ledger.kind`` =          source (``ledger.memory.source``, else the span name) and trust
``memory_write``)              label (``ledger.memory.trust_label``, else ``unspecified``)
status ERROR on any of these   ``outcome`` ``{"error": <exception.type / error.type>, ...}``
anything else                  no record: a frame, so spans inside it link up correctly
=============================  =================================================================

``ledger.kind`` may be ``tool_call``, ``llm``, ``handoff``, ``memory_write`` or ``outcome``
(a plain ``outcome`` record with the span's otel ids). Records are emitted when spans end
(children before parents), in the run current where the outermost tracked span started, or in
the ``run`` given; every record has the span's start and end (``started_at``/``ended_at``).
A span that maps to a record but started where no run was open is not recorded: the processor
warns once (``UnrecordedDecisionWarning``). Values are captured as by ``@decision``: salted
commitments by default (``capture="commit"``); ``"digest"`` (unsalted, guessable) and
``"content"`` as there.
"""

from __future__ import annotations

import json
import logging
import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.context import Context  # type: ignore[import-not-found,unused-ignore]
from opentelemetry.sdk.trace import (  # type: ignore[import-not-found,unused-ignore]
    ReadableSpan,
    Span,
    SpanProcessor,
)
from opentelemetry.trace import StatusCode  # type: ignore[import-not-found,unused-ignore]

from ledger.core.jcs import child_path
from ledger.records.decision import (
    Candidate,
    Cost,
    Handoff,
    MemoryWrite,
    OtelContext,
    Outcome,
    Payload,
    ToolCall,
    ToolSelection,
    Usage,
)
from ledger_client.bridges import Opened, SpanTracker, captured_fields
from ledger_client.sdk.capture import Capture, CapturedValue, capture_value
from ledger_client.sdk.context import Run, rfc3339
from ledger_client.sdk.decorators import UnrecordedDecisionWarning

__all__ = ["LLM_OPERATIONS", "LedgerSpanProcessor"]

LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_REQUEST = "gen_ai.request."
_log = logging.getLogger("ledger_client.bridges.otel")
_KINDS = {
    "execute_tool": "tool_call",
    "invoke_agent": "handoff",
    **dict.fromkeys(LLM_OPERATIONS, "llm"),
}


def _kind(attrs: Mapping[str, Any]) -> str | None:
    explicit = attrs.get("ledger.kind")
    if isinstance(explicit, str):
        return explicit
    if "ledger.memory.key" in attrs:
        return "memory_write"
    return _KINDS.get(str(attrs.get("gen_ai.operation.name")))


def _tool_calls(messages: object) -> list[tuple[str, str]]:
    """(call id, tool name) of the ``tool_call`` parts of GenAI output messages (JSON text)."""
    try:
        parsed = json.loads(messages) if isinstance(messages, str) else messages
    except ValueError:
        return []
    out: list[tuple[str, str]] = []
    for message in parsed if isinstance(parsed, list) else []:
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and part.get("type") == "tool_call":
                name = str(part.get("name") or "tool")
                call_id = str(part.get("id") or f"{name}#{len(out)}")
                out.append(
                    (
                        call_id if call_id not in (c for c, _ in out) else f"{call_id}#{len(out)}",
                        name,
                    )
                )
    return out


def _error_type(span: ReadableSpan) -> str:
    for event in span.events or ():
        if event.name == "exception" and event.attributes:
            return str(event.attributes.get("exception.type", "error"))
    return str((span.attributes or {}).get("error.type", "error"))


class LedgerSpanProcessor(SpanProcessor):  # type: ignore[misc,unused-ignore]
    """OpenTelemetry spans to decision records (module docstring)."""

    def __init__(self, run: Run | None = None, *, capture: str = "commit") -> None:
        self.capture = Capture(capture)
        self.spans = SpanTracker(run, self.capture)
        self._warned = False
        self._warn_lock = threading.Lock()

    def _unrecorded(self, span: ReadableSpan, kind: str) -> None:
        """Say once per processor that a span that maps to a record was not recorded because
        no ledger run was open where it started (as ``@decision`` and LangChain do)."""
        with self._warn_lock:
            if self._warned:
                return
            self._warned = True
        message = (
            f"LedgerSpanProcessor: no ledger run was open when the {kind} span {span.name!r} "
            "started, so it (and any other until a run opens) is not recorded; open one with "
            "`with ledger_run(...)` or pass run=..."
        )
        _log.warning(message)
        warnings.warn(message, UnrecordedDecisionWarning, stacklevel=2)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        parent = span.parent.span_id if span.parent is not None else None
        self.spans.open(span.context.span_id, parent, name=span.name, kind="span")

    def on_end(self, span: ReadableSpan) -> None:
        opened = self.spans.close(span.context.span_id)
        attrs: Mapping[str, Any] = span.attributes or {}
        kind = _kind(attrs)
        if opened is None:
            if kind is not None:
                self._unrecorded(span, kind)
            return
        if kind is None:
            opened.frame.run.fold(opened.frame)
            return
        opened.kind = kind
        otel = OtelContext(
            trace_id=f"{span.context.trace_id:032x}", span_id=f"{span.context.span_id:016x}"
        )
        times = {"started_at": _time(span.start_time), "ended_at": _time(span.end_time)}
        if span.status.status_code == StatusCode.ERROR:
            self.spans.fail(opened, _error_type(span), otel=otel, model=_model(attrs), **times)
            return
        payload, fields, disclosures = self._record(kind, opened, attrs)
        clear = fields.pop("clear", ())
        self.spans.finish(opened, payload, disclosures, otel=otel, clear=clear, **times, **fields)

    def shutdown(self) -> None:
        """Nothing to release: records are the client's to deliver."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered here."""
        return True

    # --- span -> record ---------------------------------------------------------------------

    def _capture(
        self, attrs: Mapping[str, Any], names: Mapping[str, str]
    ) -> dict[str, CapturedValue]:
        return {
            label: capture_value(attrs[key], self.capture, child_path("parameters", label))
            for label, key in names.items()
            if key in attrs
        }

    def _output(
        self, attrs: Mapping[str, Any], key: str, label: str
    ) -> tuple[str, CapturedValue] | None:
        if key not in attrs:
            return None
        return label, capture_value(attrs[key], self.capture, "actual_outcome")

    def _record(
        self, kind: str, opened: Opened, attrs: Mapping[str, Any]
    ) -> tuple[Payload, dict[str, Any], list[Any]]:
        if kind == "tool_call":
            return self._tool(opened, attrs)
        if kind == "llm":
            return self._llm(attrs)
        if kind == "handoff":
            return Handoff(to_agent=str(attrs.get("gen_ai.agent.name") or opened.name)), {}, []
        if kind == "memory_write":
            return self._memory(opened, attrs)
        return Outcome(), {}, []

    def _tool(
        self, opened: Opened, attrs: Mapping[str, Any]
    ) -> tuple[Payload, dict[str, Any], list[Any]]:
        inputs = self._capture(attrs, {"arguments": "gen_ai.tool.call.arguments"})
        out = self._output(attrs, "gen_ai.tool.call.result", "result")
        payload = ToolCall(
            tool=str(attrs.get("gen_ai.tool.name") or opened.name),
            inputs_used=tuple(v.digest for v in inputs.values()),
            outputs_generated=(out[1].digest,) if out else (),
        )
        fields, disclosures = captured_fields(self.capture, inputs, out)
        return payload, fields, disclosures

    def _llm(self, attrs: Mapping[str, Any]) -> tuple[Payload, dict[str, Any], list[Any]]:
        inputs = self._capture(attrs, {"input_messages": "gen_ai.input.messages"})
        out = self._output(attrs, "gen_ai.output.messages", "output_messages")
        fields, disclosures = captured_fields(self.capture, inputs, out)
        fields["model"] = _model(attrs)
        fields["usage"] = _usage(attrs)
        fields["model_parameters"] = _model_parameters(attrs)
        fields["cost"] = _cost(attrs)
        calls = _tool_calls(attrs.get("gen_ai.output.messages"))
        if calls:
            fields["candidates"] = tuple(
                Candidate(id=c, action=tool, score="1", rank=i + 1)
                for i, (c, tool) in enumerate(calls)
            )
            fields["selected"] = calls[0][0]
            fields["clear"] = ("candidates",)  # each action is a tool's name: in clear
            return ToolSelection(), fields, disclosures
        reasons = attrs.get("gen_ai.response.finish_reasons")
        if reasons is not None and "actual_outcome" not in fields:
            fields["actual_outcome"] = {"finish_reasons": [str(r) for r in reasons]}
            fields["clear"] = ("actual_outcome",)  # a status
        return Outcome(), fields, disclosures

    def _memory(
        self, opened: Opened, attrs: Mapping[str, Any]
    ) -> tuple[Payload, dict[str, Any], list[Any]]:
        value = capture_value(attrs.get("ledger.memory.value"), self.capture, "payload.value")
        payload = MemoryWrite(
            key=str(attrs.get("ledger.memory.key", opened.name)),
            value=value.value if value.value is not None else f"sha256:{value.digest}",
            source=str(attrs.get("ledger.memory.source", opened.name)),
            trust_label=str(attrs.get("ledger.memory.trust_label", "unspecified")),
        )
        digest_only = ("payload.value",) if self.capture is Capture.DIGEST else ()
        kept = [value.disclosure] if value.disclosure is not None else []
        return payload, {"clear": digest_only}, kept


def _time(nanoseconds: int | None) -> str | None:
    return None if nanoseconds is None else rfc3339(nanoseconds / 1e9)


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _usage(attrs: Mapping[str, Any]) -> Usage | None:
    """``gen_ai.usage.input_tokens`` / ``output_tokens`` (total: their sum when both are set)."""
    given = _count(attrs.get("gen_ai.usage.input_tokens"))
    made = _count(attrs.get("gen_ai.usage.output_tokens"))
    if given is None and made is None:
        return None
    total = given + made if given is not None and made is not None else None
    return Usage(input_tokens=given, output_tokens=made, total_tokens=total)


def _model_parameters(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The ``gen_ai.request.*`` settings (temperature, top_p, max_tokens...), by their short
    name; the model id is ``model`` and not repeated here."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if not key.startswith(_REQUEST) or key == f"{_REQUEST}model":
            continue
        if isinstance(value, bool | int | float | str):
            out[key[len(_REQUEST) :]] = value
        elif isinstance(value, Sequence):
            out[key[len(_REQUEST) :]] = list(value)
    return out


def _cost(attrs: Mapping[str, Any]) -> Cost | None:
    """``ledger.cost.amount`` (a decimal string) and ``ledger.cost.currency`` (ISO 4217)."""
    amount, currency = attrs.get("ledger.cost.amount"), attrs.get("ledger.cost.currency")
    if isinstance(amount, str) and isinstance(currency, str):
        return Cost(amount=amount, currency=currency)
    return None


def _model(attrs: Mapping[str, Any]) -> str | None:
    model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
    return None if model is None else str(model)
