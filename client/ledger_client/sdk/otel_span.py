"""The active OpenTelemetry span's W3C trace and span ids, without importing OpenTelemetry.

docs/design.md "Decision record (v1)": ``otel`` holds trace/span ids as a join key. ``@decision``
calls ``current_otel`` on every record: it looks at ``opentelemetry.trace`` only if the
application has imported it already (so the SDK stays free of the dependency and costs nothing
where OpenTelemetry is not used), and returns the ids of the current span when it is valid.
"""

from __future__ import annotations

import sys

from ledger.records.decision import OtelContext

__all__ = ["current_otel"]


def current_otel() -> OtelContext | None:
    """``OtelContext`` of the current OpenTelemetry span, or None (no OTel, no valid span)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return OtelContext(trace_id=f"{context.trace_id:032x}", span_id=f"{context.span_id:016x}")
