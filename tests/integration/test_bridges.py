"""The LangChain callback handler and the OpenTelemetry span processor, with those libraries
really installed (each test skips cleanly where its library is absent): the records they make,
their parent links and steps, OTel ids as join keys, and a bridged run that passes
``ledger-verify run`` against a real log."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.records.commitments import LeafDisclosure, select_disclosures
from ledger.records.decision import (
    Cost,
    DecisionRecord,
    MemoryWrite,
    ToolCall,
    Usage,
    record_digest,
    verify_disclosure,
)
from ledger_client.cli.main import main
from ledger_client.sdk.capture import content_digest
from ledger_client.sdk.client import LedgerClient, SenderOptions
from ledger_client.sdk.context import ledger_run
from ledger_client.sdk.decorators import UnrecordedDecisionWarning, decision
from tests.agent_sink import Sink, assert_run_ok
from tests.harness import running_server

pytestmark = pytest.mark.integration


def kinds(sink: Sink) -> list[str]:
    return [r.kind for r in sink.records]


# --- LangChain ---------------------------------------------------------------------------------


def langchain_agent(handler: Any) -> str:
    """A tiny tool-using agent: the model asks for a tool, the tool runs, memory is written,
    the model answers. Everything runs inside one outer chain."""
    from langchain_core.callbacks import dispatch_custom_event
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda
    from langchain_core.tools import tool

    @tool
    def search(query: str) -> str:
        """Search the web."""
        return f"results for {query}"

    ask = AIMessage(
        content="", tool_calls=[{"name": "search", "args": {"query": "rain"}, "id": "c1"}]
    )
    model = FakeMessagesListChatModel(responses=[ask, AIMessage(content="It rains.")])

    def loop(question: str) -> str:
        reply = model.invoke(question)
        call = reply.tool_calls[0]
        found = search.invoke(call["args"])
        dispatch_custom_event(
            "ledger.memory_write",
            {
                "key": "last_search",
                "value": found,
                "source": "tool:search",
                "trust_label": "untrusted",
            },
        )
        return str(model.invoke(f"{question} {found}").content)

    answer: str = RunnableLambda(loop).invoke("weather?", config={"callbacks": [handler]})
    return answer


def test_langchain_agent_becomes_decision_records() -> None:
    pytest.importorskip("langchain_core")
    from ledger_client.bridges.langchain import LedgerCallbackHandler

    sink = Sink()
    with ledger_run(sink, agent="lc-agent"):
        assert langchain_agent(LedgerCallbackHandler(capture="digest")) == "It rains."
    assert kinds(sink) == ["tool_selection", "tool_call", "memory_write", "outcome", "run_closed"]
    select, call, memory, answer, _ = sink.records
    assert [(c.id, c.action, c.rank) for c in select.candidates] == [("c1", "search", 1)]
    assert select.selected == "c1" and select.evidence.keys() == {"prompt", "completion"}
    assert call.payload == ToolCall(
        tool="search",
        inputs_used=(content_digest({"query": "rain"}),),
        outputs_generated=(call.evidence["output"],),
    )
    assert isinstance(memory.payload, MemoryWrite)
    assert memory.payload.value == "sha256:" + content_digest("results for rain")
    assert memory.payload.trust_label == "untrusted"
    chain = [select, call, memory, answer]
    for earlier, later in itertools.pairwise(chain):
        assert later.parent_digests == (record_digest(earlier).hex(),)
    assert "It rains" not in answer.to_json()  # digests only by default
    assert "results for" not in memory.to_json()
    assert_run_ok(sink)


def test_langchain_content_capture_and_tool_errors() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.tools import tool

    from ledger_client.bridges.langchain import LedgerCallbackHandler

    @tool
    def explode(x: int) -> int:
        """Always fails."""
        raise RuntimeError("boom")

    @tool
    def double(x: int) -> int:
        """Doubles."""
        return 2 * x

    sink = Sink()
    handler = LedgerCallbackHandler(capture="content")
    with ledger_run(sink, agent="lc"):
        assert double.invoke({"x": 4}, config={"callbacks": [handler]}) == 8
        with pytest.raises(RuntimeError):
            explode.invoke({"x": 1}, config={"callbacks": [handler]})
    ok, failed, _ = sink.records
    assert ok.parameters == {"input": {"x": 4}} and ok.actual_outcome == 8
    assert failed.kind == "outcome"
    assert failed.actual_outcome == {
        "error": "RuntimeError",
        "decision": "tool_call",
        "name": "explode",
    }
    assert_run_ok(sink)


def test_langchain_agent_actions_and_retrievers() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.agents import AgentAction, AgentFinish
    from langchain_core.callbacks import CallbackManager
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from ledger_client.bridges.langchain import LedgerCallbackHandler

    class Notes(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            return [Document(page_content=f"note about {query}")]

    sink = Sink()
    handler = LedgerCallbackHandler(capture="digest")
    with ledger_run(sink, agent="lc"):
        manager = CallbackManager.configure([handler])
        agent = manager.on_chain_start({"name": "AgentExecutor"}, {"input": "q"})
        agent.on_agent_action(AgentAction(tool="notes", tool_input="q", log="thinking"))
        Notes().invoke("q", config={"callbacks": agent.get_child()})
        agent.on_agent_finish(AgentFinish(return_values={"output": "done"}, log=""))
        agent.on_chain_end({"output": "done"})
    assert kinds(sink) == ["tool_selection", "tool_call", "termination", "run_closed"]
    action, lookup, finish, _ = sink.records
    assert action.selected == "notes" and action.evidence == {"tool_input": content_digest("q")}
    assert lookup.payload.tool == "retriever:Notes"  # type: ignore[union-attr]
    assert lookup.parent_digests == (record_digest(action).hex(),)
    assert finish.payload.reason == "agent_finish"  # type: ignore[union-attr]
    assert_run_ok(sink)


# --- OpenTelemetry -------------------------------------------------------------------------------


def tracer_with(processor: Any) -> Any:
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider.get_tracer("test")


TOOL_CALL_REPLY = json.dumps(
    [{"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather"}]}]
)


def otel_agent(tracer: Any) -> dict[str, Any]:
    """GenAI spans of one agent turn; returns the span contexts by name."""
    from opentelemetry.trace import Status, StatusCode

    seen: dict[str, Any] = {}
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"}
    with tracer.start_as_current_span("invoke_agent weather", attributes=agent) as outer:
        seen["agent"] = outer.get_span_context()
        chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m-1",
                "gen_ai.output.messages": TOOL_CALL_REPLY}  # fmt: skip
        with tracer.start_as_current_span("chat m-1", attributes=chat) as span:
            seen["chat"] = span.get_span_context()
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.arguments": '{"city":"Paris"}',
                "gen_ai.tool.call.result": "rain"}  # fmt: skip
        with (
            tracer.start_as_current_span("execute_tool get_weather", attributes=tool),
            tracer.start_as_current_span("http GET"),  # no record: a frame
        ):
            pass
        memory = {"ledger.memory.key": "forecast", "ledger.memory.value": "rain",
                  "ledger.memory.trust_label": "untrusted"}  # fmt: skip
        with tracer.start_as_current_span("remember", attributes=memory):
            pass
        with tracer.start_as_current_span(
            "execute_tool", attributes={"gen_ai.operation.name": "execute_tool"}
        ) as bad:
            bad.set_status(Status(StatusCode.ERROR))
            bad.add_event("exception", {"exception.type": "TimeoutError"})
        final = {"gen_ai.operation.name": "chat", "gen_ai.response.model": "m-1-2025",
                 "gen_ai.response.finish_reasons": ("stop",)}  # fmt: skip
        with tracer.start_as_current_span("chat m-1", attributes=final):
            pass
    return seen


def test_otel_spans_become_decision_records() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from ledger_client.bridges.otel import LedgerSpanProcessor

    sink = Sink()
    with ledger_run(sink, agent="otel-agent"):
        seen = otel_agent(tracer_with(LedgerSpanProcessor(capture="digest")))
    assert kinds(sink) == [
        "tool_selection", "tool_call", "memory_write", "outcome", "outcome", "handoff",
        "run_closed",
    ]  # fmt: skip
    select, call, memory, failed, final, handoff, _ = sink.records
    assert select.model == "m-1" and select.selected == "call_1"
    assert select.otel is not None
    assert select.otel.span_id == f"{seen['chat'].span_id:016x}"
    assert select.otel.trace_id == f"{seen['chat'].trace_id:032x}"
    assert call.payload == ToolCall(
        tool="get_weather",
        inputs_used=(content_digest('{"city":"Paris"}'),),
        outputs_generated=(content_digest("rain"),),
    )
    assert memory.payload == MemoryWrite(
        key="forecast", value="sha256:" + content_digest("rain"), source="remember",
        trust_label="untrusted",
    )  # fmt: skip
    assert failed.actual_outcome == {
        "error": "TimeoutError",
        "decision": "tool_call",
        "name": "execute_tool",
    }
    assert final.actual_outcome == {"finish_reasons": ["stop"]} and final.model == "m-1-2025"
    assert handoff.payload.to_agent == "weather"  # type: ignore[union-attr]
    assert handoff.otel is not None and handoff.otel.span_id == f"{seen['agent'].span_id:016x}"
    assert handoff.parent_digests == (record_digest(final).hex(),)  # what ran inside it
    chain = [select, call, memory, failed, final]
    for earlier, later in itertools.pairwise(chain):
        assert later.parent_digests == (record_digest(earlier).hex(),)
    assert_run_ok(sink)


def test_otel_spans_inside_a_decorated_call_are_its_parents() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from ledger_client.bridges.otel import LedgerSpanProcessor

    tracer = tracer_with(LedgerSpanProcessor(capture="digest"))

    @decision("plan", name="turn", steps=("look up",))
    def turn() -> None:
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"}
        for _ in range(2):
            with tracer.start_as_current_span("execute_tool lookup", attributes=attrs):
                pass

    sink = Sink()
    with ledger_run(sink, agent="a"):
        turn()
    first, second, plan, _ = sink.records
    assert second.parent_digests == (record_digest(first).hex(),)
    assert plan.parent_digests == (record_digest(second).hex(),)
    assert_run_ok(sink)


def test_spans_outside_any_run_warn_once() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from ledger_client.bridges.otel import LedgerSpanProcessor

    tracer = tracer_with(LedgerSpanProcessor(capture="digest"))
    tool = {"gen_ai.operation.name": "execute_tool"}
    with pytest.warns(UnrecordedDecisionWarning, match="no ledger run was open") as seen:
        for _ in range(3):
            with tracer.start_as_current_span("execute_tool", attributes=tool):
                pass  # no run open: no record, no error, one warning
        with tracer.start_as_current_span("http GET"):
            pass  # not a GenAI span: nothing to say
    assert len(seen) == 1


def test_otel_token_counts_model_parameters_and_times_reach_the_record() -> None:
    pytest.importorskip("opentelemetry.sdk")
    from ledger_client.bridges.otel import LedgerSpanProcessor

    tracer = tracer_with(LedgerSpanProcessor())
    chat = {
        "gen_ai.operation.name": "chat", "gen_ai.request.model": "m-1",
        "gen_ai.request.temperature": 0.2, "gen_ai.request.max_tokens": 256,
        "gen_ai.request.stop_sequences": ("END",), "gen_ai.usage.input_tokens": 812,
        "gen_ai.usage.output_tokens": 64, "gen_ai.response.finish_reasons": ("stop",),
        "ledger.cost.amount": "0.0042", "ledger.cost.currency": "USD",
        "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]',
    }  # fmt: skip
    sink = Sink()
    with (
        ledger_run(sink, agent="otel-agent"),
        tracer.start_as_current_span("chat", attributes=chat),
    ):
        pass
    record = sink.records[0]
    assert record.usage == Usage(input_tokens=812, output_tokens=64, total_tokens=876)
    assert record.model_parameters == {
        "temperature": 0.2, "max_tokens": 256, "stop_sequences": ["END"],
    }  # fmt: skip
    assert record.cost == Cost(amount="0.0042", currency="USD")
    assert record.started_at is not None and record.ended_at is not None
    assert record.started_at <= record.ended_at
    assert record.actual_outcome == {"finish_reasons": ["stop"]}  # a status, in clear
    assert '"hi"' not in record.to_json()  # the input messages are committed
    assert_run_ok(sink)


def test_langchain_completions_keep_tool_calls_and_usage(tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage

    from ledger_client.bridges.langchain import LedgerCallbackHandler

    usage = {"input_tokens": 30, "output_tokens": 7, "total_tokens": 37}
    ask = AIMessage(
        content="",
        tool_calls=[{"name": "search", "args": {"query": "rain in Paris"}, "id": "c1"}],
        usage_metadata=usage,
    )
    model = FakeMessagesListChatModel(responses=[ask])
    sink = Sink()
    handler = LedgerCallbackHandler()
    with ledger_run(sink, agent="lc") as run:
        model.invoke("weather?", config={"callbacks": [handler]})
    select = sink.records[0]
    assert select.kind == "tool_selection" and select.usage == Usage(**usage)
    assert [c.action for c in select.candidates] == ["search"]  # a tool name: in clear
    assert "rain in Paris" not in select.to_json()  # the completion is committed
    kept = run.entries[0].disclosures
    opened, missing = select_disclosures(["actual_outcome"], kept)
    assert not missing
    shown = {d.pointer: d.value for d in opened if isinstance(d, LeafDisclosure)}
    message = "/generations/0/0/message"
    assert shown[f"{message}/tool_calls/0/name"] == "search"
    assert shown[f"{message}/tool_calls/0/args/query"] == "rain in Paris"
    assert shown[f"{message}/usage_metadata/input_tokens"] == 30
    assert shown[f"{message}/usage_metadata/output_tokens"] == 7
    for d in opened:
        verify_disclosure(select, d, record_digest(select))
    assert_run_ok(sink)


def test_bridged_runs_verify_against_a_real_log(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    pytest.importorskip("langchain_core")
    from ledger_client.bridges.langchain import LedgerCallbackHandler
    from ledger_client.bridges.otel import LedgerSpanProcessor

    run_file = tmp_path / "run.jsonl"
    with running_server(tmp_path / "data") as (server, _, _):
        client = LedgerClient(
            server.address, spool=tmp_path / "a.spool", options=SenderOptions(batch_age=0.01)
        )
        with ledger_run(client, agent="bridged", receipts=run_file) as run:
            otel_agent(tracer_with(LedgerSpanProcessor()))
            langchain_agent(LedgerCallbackHandler())
        assert client.close(5)
        result = CliRunner().invoke(
            main, ["run", str(run_file), "--key", server.app.verifier_key, "--json"]
        )
    report = json.loads(result.output)
    assert result.exit_code == 0, report
    assert report["records"] == len(run.entries) == 6 + 4 + 1
    records = [
        DecisionRecord.from_json_obj(json.loads(line)["record"])
        for line in run_file.read_text().splitlines()
    ]
    assert sum(1 for r in records if r.otel is not None) == 6
