"""Bridges from agent frameworks to decision records (optional extras, imported only when used).

Owns: the framework bridges and the bookkeeping they share.

* ``ledger_client.bridges.langchain.LedgerCallbackHandler``: a LangChain callback handler
  (needs ``langchain-core``).
* ``ledger_client.bridges.otel.LedgerSpanProcessor``: an OpenTelemetry span processor for
  GenAI spans (needs ``opentelemetry-sdk``); records keep the trace and span ids (``otel``).

Both map the framework's nested runs or spans onto frames of a ledger run
(``ledger_client.sdk.context``), so the records get steps and parent links like those of
``@decision``: a tool/LLM/agent/memory span's record has as parents the records emitted inside
it, or else the records before it. They write to the run given to them, or else to the run
current where the outermost span starts. This package itself imports neither framework;
``SpanTracker`` is the framework-free bookkeeping both share.

May import: ``ledger.core``, ``ledger.records``, ``ledger_client.sdk``; libraries
``langchain_core``, ``opentelemetry`` (each only in its own module).
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.records.commitments import Kept
from ledger.records.decision import Outcome, Payload
from ledger_client.sdk.capture import Capture, CapturedValue
from ledger_client.sdk.classify import ALL, Clear
from ledger_client.sdk.context import Frame, Run, RunEntry, current_frame, error_name

__all__ = ["Opened", "SpanTracker", "captured_fields"]


@dataclass(slots=True)
class Opened:
    """A framework run or span in progress: its frame and what its start event told us."""

    frame: Frame
    name: str
    kind: str
    inputs: CapturedValue | None = None
    model: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class SpanTracker:
    """Frames of open spans keyed by the framework's ids; thread-safe."""

    def __init__(self, run: Run | None = None, capture: Capture = Capture.COMMIT) -> None:
        self.run = run
        self.capture = capture
        self._open: dict[Hashable, Opened] = {}
        self._lock = threading.Lock()

    def clear(self, *names: str) -> Clear:
        """What a bridge's record keeps in clear (``ledger_client.sdk.classify``): everything
        with ``capture="content"``, else ``names`` (statuses, tool names the bridge knows)."""
        return ALL if self.capture is Capture.CONTENT else names

    def base(self) -> Frame | None:
        """Where an outermost span attaches: the current frame (of ``run``, if one is given)."""
        frame = current_frame()
        if self.run is None or (frame is not None and frame.run is self.run):
            return frame
        return None if self.run.closed is not None else self.run.root

    def open(
        self, key: Hashable, parent: Hashable | None, *, name: str, kind: str, **info: Any
    ) -> Opened | None:
        """Track span ``key`` inside ``parent`` (or the base frame); None when no run is open."""
        with self._lock:
            outer = self._open.get(parent) if parent is not None else None
        frame = outer.frame if outer is not None else self.base()
        if frame is None or frame.run.closed is not None:
            return None
        opened = Opened(frame=frame.run.child(frame), name=name, kind=kind, **info)
        with self._lock:
            self._open[key] = opened
        return opened

    def close(self, key: Hashable) -> Opened | None:
        """Stop tracking ``key``; what was opened for it, if anything."""
        with self._lock:
            return self._open.pop(key, None)

    def frame_of(self, key: Hashable) -> Frame | None:
        """The frame of an open span, else the base frame."""
        with self._lock:
            opened = self._open.get(key)
        return opened.frame if opened is not None else self.base()

    def fold(self, key: Hashable) -> None:
        """End a span that has no record of its own."""
        opened = self.close(key)
        if opened is not None:
            opened.frame.run.fold(opened.frame)

    def finish(
        self,
        opened: Opened,
        payload: Payload,
        disclosures: list[Kept],
        *,
        clear: Sequence[str] = (),
        **fields: Any,
    ) -> RunEntry:
        """Emit the record that ends ``opened``; ``clear``: committed-class names the bridge
        keeps in clear (statuses, tool names), besides ``capture="content"``."""
        return opened.frame.run.finish(
            opened.frame, payload, disclosures=disclosures, clear=self.clear(*clear), **fields
        )

    def fail(self, opened: Opened, error: BaseException | str, **fields: Any) -> RunEntry:
        """Emit an ``outcome`` record naming the error type of a failed span (a status, in
        clear)."""
        kind = error if isinstance(error, str) else error_name(error)
        outcome = {"error": kind, "decision": opened.kind, "name": opened.name}
        return self.finish(
            opened, Outcome(), [], clear=("actual_outcome",), actual_outcome=outcome, **fields
        )


def captured_fields(
    mode: Capture, inputs: dict[str, CapturedValue], output: tuple[str, CapturedValue] | None
) -> tuple[dict[str, Any], list[Kept]]:
    """Record fields for captured values: ``evidence`` digests (not with ``COMMIT``), and with
    ``CONTENT``/``COMMIT`` the inputs in ``parameters`` and the output in ``actual_outcome``."""
    fields: dict[str, Any] = {}
    named = {**inputs, **({output[0]: output[1]} if output else {})}
    if mode is not Capture.COMMIT:
        fields["evidence"] = {name: v.digest for name, v in named.items()}
    if mode is not Capture.DIGEST:
        fields["parameters"] = {name: v.value for name, v in inputs.items()}
        if output is not None:
            fields["actual_outcome"] = output[1].value
    disclosures = [v.disclosure for v in named.values() if v.disclosure is not None]
    return fields, disclosures
