"""LangChain bridge: a callback handler that turns tool, LLM, agent, retriever and memory events
into decision records (docs/design.md "Decision record (v1)"). Needs ``langchain-core``.

    handler = LedgerCallbackHandler()            # records go to the current ledger_run
    chain.invoke(inputs, config={"callbacks": [handler]})

Mapping (names come from ``serialized["name"]``, else the ``name`` keyword, else the id):

======================  ======================================================================
LangChain event         record
======================  ======================================================================
tool start/end          ``tool_call``: tool = name, inputs used = digest of the input, outputs
                        generated = digest of the output
LLM / chat model end    ``tool_selection`` when the reply asks for tool calls (a candidate per
                        call, in order, score "1"; ``selected`` = the first), else ``outcome``;
                        ``model`` from the response or the ``ls_model_name`` metadata; the
                        completion whole (each message as its own class: ``tool_calls``,
                        ``usage_metadata``), ``usage`` (token counts), ``model_parameters``
                        (``MODEL_PARAMETERS`` of the invocation parameters)
agent action / finish   ``tool_selection`` of the action's tool / ``termination``
                        (reason ``agent_finish``)
retriever start/end     ``tool_call`` with tool ``retriever:<name>`` (a memory read)
custom event            ``memory_write`` for ``dispatch_custom_event("ledger.memory_write",
                        {"key", "value", "source", "trust_label"})`` (value captured)
tool/LLM/retriever      ``outcome`` with ``{"error": <type>, "decision": <kind>, "name"}``
error
chains                  no record: a frame, so what runs inside links up correctly
======================  ======================================================================

Values are captured as by ``@decision`` (``ledger_client.sdk.capture``): salted commitments by
default (``capture="commit"``, the disclosures kept by the SDK); ``"digest"`` puts unsalted
digests in ``evidence`` (guessable for low-entropy values), ``"content"`` the values in clear.
The handler runs inline (``run_inline``) so records keep the order of events, and raises
recording errors (``raise_error``) rather than losing a record quietly. When an event arrives
while no ledger run is open (and no run was given), nothing can be recorded: the handler says so
once, with an ``UnrecordedDecisionWarning`` (and a log line), instead of staying silent.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler  # type: ignore[import-not-found,unused-ignore]

from ledger.core.jcs import child_path
from ledger.records.decision import (
    Candidate,
    MemoryWrite,
    Outcome,
    Termination,
    ToolCall,
    ToolSelection,
    Usage,
)
from ledger_client.bridges import Opened, SpanTracker, captured_fields
from ledger_client.sdk.capture import Capture, CapturedValue, capture_value
from ledger_client.sdk.context import Run
from ledger_client.sdk.decorators import UnrecordedDecisionWarning

__all__ = ["MEMORY_EVENT", "LedgerCallbackHandler"]

MEMORY_EVENT = "ledger.memory_write"
_log = logging.getLogger("ledger_client.bridges.langchain")


def _name(serialized: Mapping[str, Any] | None, kwargs: Mapping[str, Any], default: str) -> str:
    if serialized and isinstance(serialized.get("name"), str):
        return str(serialized["name"])
    if isinstance(kwargs.get("name"), str):
        return str(kwargs["name"])
    ids = (serialized or {}).get("id")
    return str(ids[-1]) if isinstance(ids, list) and ids else default


def _tool_calls(response: Any) -> list[tuple[str, str]]:
    """(call id, tool name) of every tool call in the first generation's message."""
    generations = getattr(response, "generations", None) or [[]]
    first = generations[0][0] if generations[0] else None
    calls = getattr(getattr(first, "message", None), "tool_calls", None) or []
    out: list[tuple[str, str]] = []
    for i, call in enumerate(calls):
        name = str(call.get("name") or "tool")
        call_id = str(call.get("id") or f"{name}#{i}")
        out.append((call_id if call_id not in (c for c, _ in out) else f"{call_id}#{i}", name))
    return out


MODEL_PARAMETERS = (
    "temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens", "max_output_tokens",
    "n", "seed", "frequency_penalty", "presence_penalty", "stop",
)  # fmt: skip


def _model_parameters(params: Mapping[str, Any], metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The model's settings from the invocation parameters (``ls_temperature``... metadata as a
    fallback): ``MODEL_PARAMETERS`` only, numbers, booleans, strings or lists of strings."""
    out: dict[str, Any] = {}
    for name in MODEL_PARAMETERS:
        value = params.get(name, metadata.get(f"ls_{name}"))
        if isinstance(value, bool | int | float | str):
            out[name] = value
        elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            out[name] = list(value)
    return out


def _message(generation: Any) -> Any:
    """A generation's message serialised as its own class (an ``AIMessage`` keeps
    ``tool_calls``, ``invalid_tool_calls`` and ``usage_metadata``, which a dump through the
    generation's declared ``BaseMessage`` type drops)."""
    message = getattr(generation, "message", None)
    dump = getattr(message, "model_dump", None)
    return dump(mode="json") if callable(dump) else message


def _completion(response: Any) -> Any:
    """The LLM result as recorded: every generation (text, info, full message) and
    ``llm_output``."""
    generations = getattr(response, "generations", None)
    if generations is None:
        return response
    return {
        "generations": [
            [
                {
                    "text": getattr(g, "text", None),
                    "generation_info": getattr(g, "generation_info", None),
                    "message": _message(g),
                }
                for g in batch
            ]
            for batch in generations
        ],
        "llm_output": getattr(response, "llm_output", None),
    }


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _usage(response: Any) -> Usage | None:
    """Token counts: the messages' ``usage_metadata`` summed, else ``llm_output``'s
    ``token_usage`` (``prompt_tokens``/``completion_tokens``/``total_tokens``)."""
    found = [
        meta
        for batch in getattr(response, "generations", None) or []
        for g in batch
        if isinstance(meta := getattr(getattr(g, "message", None), "usage_metadata", None), dict)
    ]
    if found:
        sums: dict[str, int | None] = {}
        for name in ("input_tokens", "output_tokens", "total_tokens"):
            counts = [c for m in found if (c := _count(m.get(name))) is not None]
            sums[name] = sum(counts) if counts else None
        return Usage(**sums)
    token_usage = (getattr(response, "llm_output", None) or {}).get("token_usage")
    if isinstance(token_usage, Mapping):
        return Usage(
            input_tokens=_count(token_usage.get("prompt_tokens")),
            output_tokens=_count(token_usage.get("completion_tokens")),
            total_tokens=_count(token_usage.get("total_tokens")),
        )
    return None


class LedgerCallbackHandler(BaseCallbackHandler):  # type: ignore[misc,unused-ignore]
    """LangChain callbacks to decision records (module docstring)."""

    run_inline = True

    def __init__(
        self, run: Run | None = None, *, capture: str = "commit", raise_error: bool = True
    ) -> None:
        super().__init__()
        self.raise_error = raise_error
        self.capture = Capture(capture)
        self.spans = SpanTracker(run, self.capture)
        self._warned = False

    def _unrecorded(self, event: str) -> None:
        """Say once per handler that events go unrecorded because no ledger run is open."""
        if self._warned:
            return
        self._warned = True
        message = (
            f"LedgerCallbackHandler: no ledger run is open, so the {event} event (and any "
            "other until a run opens) is not recorded; open one with `with ledger_run(...)` "
            "or pass run=..."
        )
        _log.warning(message)
        warnings.warn(message, UnrecordedDecisionWarning, stacklevel=3)

    def _in(self, value: object, name: str) -> dict[str, CapturedValue]:
        return {name: capture_value(value, self.capture, child_path("parameters", name))}

    def _out(self, value: object, name: str) -> tuple[str, CapturedValue]:
        return name, capture_value(value, self.capture, "actual_outcome")

    def _start(
        self, run_id: UUID, parent_run_id: UUID | None, kind: str, name: str, **info: Any
    ) -> None:
        opened = self.spans.open(run_id, parent_run_id, name=name, kind=kind, **info)
        if opened is None:
            self._unrecorded(kind)
        else:
            opened.extra["started_at"] = opened.frame.run.now()

    @staticmethod
    def _times(opened: Opened) -> dict[str, Any]:
        return {"started_at": opened.extra.get("started_at"), "ended_at": opened.frame.run.now()}

    # --- chains: frames only -----------------------------------------------------------------

    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, parent_run_id, "chain", _name(serialized, kwargs, "chain"))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.spans.fold(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.spans.fold(run_id)

    # --- tools and retrievers: tool_call ----------------------------------------------------------

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        given = self._in(input_str if inputs is None else inputs, "input")
        name = _name(serialized, kwargs, "tool")
        self._start(run_id, parent_run_id, "tool_call", name, extra={"inputs": given})

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end_call(run_id, output)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._fail(run_id, error)

    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        name = "retriever:" + _name(serialized, kwargs, "retriever")
        self._start(
            run_id, parent_run_id, "tool_call", name, extra={"inputs": self._in(query, "query")}
        )

    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any) -> None:
        self._end_call(run_id, list(documents))

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._fail(run_id, error)

    def _end_call(self, run_id: UUID, output: Any) -> None:
        opened = self.spans.close(run_id)
        if opened is None:
            return
        inputs: dict[str, CapturedValue] = opened.extra["inputs"]
        out = self._out(output, "output")
        payload = ToolCall(
            tool=opened.name,
            inputs_used=tuple(v.digest for v in inputs.values()),
            outputs_generated=(out[1].digest,),
        )
        fields, disclosures = captured_fields(self.capture, inputs, out)
        self.spans.finish(opened, payload, disclosures, **fields, **self._times(opened))

    def _fail(self, run_id: UUID, error: BaseException) -> None:
        opened = self.spans.close(run_id)
        if opened is not None:
            self.spans.fail(opened, error, model=opened.model, **self._times(opened))

    # --- LLMs: tool_selection or outcome ------------------------------------------------------

    def _start_llm(
        self, serialized: dict[str, Any], prompt: object, run_id: UUID, parent: Any, kw: Any
    ) -> None:
        metadata = kw.get("metadata") or {}
        params = kw.get("invocation_params") or {}
        model = metadata.get("ls_model_name") or params.get("model") or params.get("model_name")
        settings = _model_parameters(params, metadata)
        name = _name(serialized, kw, "llm")
        extra = {"inputs": self._in(prompt, "prompt"), "model_parameters": settings}
        self._start(run_id, parent, "llm", name, model=model, extra=extra)

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start_llm(serialized, prompts, run_id, parent_run_id, kwargs)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start_llm(serialized, messages, run_id, parent_run_id, kwargs)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        opened = self.spans.close(run_id)
        if opened is None:
            return
        out = self._out(_completion(response), "completion")
        fields, disclosures = captured_fields(self.capture, opened.extra["inputs"], out)
        llm_output = getattr(response, "llm_output", None) or {}
        fields["model"] = llm_output.get("model_name") or opened.model
        fields["usage"] = _usage(response)
        fields["model_parameters"] = opened.extra.get("model_parameters") or {}
        fields.update(self._times(opened))
        calls = _tool_calls(response)
        if not calls:
            self.spans.finish(opened, Outcome(), disclosures, **fields)
            return
        fields["candidates"] = tuple(
            Candidate(id=call_id, action=tool, score="1", rank=i + 1)
            for i, (call_id, tool) in enumerate(calls)
        )
        fields["selected"] = calls[0][0]
        # each candidate's action is the tool's name: a tool name is in clear
        self.spans.finish(opened, ToolSelection(), disclosures, clear=("candidates",), **fields)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._fail(run_id, error)

    # --- agents and memory: instant records in the enclosing frame -------------------------------

    def _emit_in(self, run_id: UUID, payload: Any, *, clear: Any = (), **fields: Any) -> None:
        frame = self.spans.frame_of(run_id)
        if frame is None:
            self._unrecorded(payload.KIND)
            return
        frame.run.emit(payload, frame=frame, clear=self.spans.clear(*clear), **fields)

    def on_agent_action(self, action: Any, *, run_id: UUID, **kwargs: Any) -> None:
        tool = str(getattr(action, "tool", "tool"))
        given = self._in(getattr(action, "tool_input", None), "tool_input")
        fields, disclosures = captured_fields(self.capture, given, None)
        candidate = Candidate(id=tool, action=tool, score="1", rank=1)
        self._emit_in(
            run_id, ToolSelection(), candidates=(candidate,), selected=tool,
            disclosures=disclosures, clear=("candidates",), **fields,
        )  # fmt: skip

    def on_agent_finish(self, finish: Any, *, run_id: UUID, **kwargs: Any) -> None:
        out = self._out(getattr(finish, "return_values", None), "return_values")
        fields, disclosures = captured_fields(self.capture, {}, out)
        payload = Termination(reason="agent_finish")  # a fixed label, not the agent's text
        self._emit_in(run_id, payload, disclosures=disclosures, clear=("payload.reason",), **fields)

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if name != MEMORY_EVENT or not isinstance(data, Mapping):
            return
        value = capture_value(data.get("value"), self.capture, "payload.value")
        payload = MemoryWrite(
            key=str(data.get("key", "memory")),
            value=value.value if value.value is not None else f"sha256:{value.digest}",
            source=str(data.get("source", "langchain")),
            trust_label=str(data.get("trust_label", "unspecified")),
        )
        disclosures = [value.disclosure] if value.disclosure is not None else []
        digest_only = ("payload.value",) if self.capture is Capture.DIGEST else ()
        self._emit_in(run_id, payload, disclosures=disclosures, clear=digest_only)
