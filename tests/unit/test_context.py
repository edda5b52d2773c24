"""Implicit run context and ``@decision``: steps, parent links (chains, nesting, fan-in) through
sync code, threads and asyncio tasks; capture modes; errors; with an in-memory sink (no log)."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import hashlib
import sys
import threading
import warnings
from typing import Any

import pytest

from ledger.core.errors import InvalidRecordError
from ledger.core.jcs import canonical_bytes
from ledger.records.decision import (
    Candidate,
    MemoryWrite,
    ToolCall,
    ToolSelection,
    record_digest,
    verify_disclosure,
)
from ledger_client.sdk.capture import Capture, capture_value, content_digest, jsonable
from ledger_client.sdk.context import (
    ContextThreadPoolExecutor,
    Run,
    current_run,
    emit,
    ledger_run,
    rfc3339,
)
from ledger_client.sdk.decorators import UnrecordedDecisionWarning, decision
from ledger_client.sdk.errors import RunStateError
from tests import processes
from tests.agent_sink import Sink, assert_run_ok


@decision("tool_call", capture="digest")
def search(query: str) -> list[str]:
    return [f"{query}-1", f"{query}-2"]


@decision("constraint_check", constraint_id="no-pii")
def check(results: list[str]) -> bool:
    return all("@" not in r for r in results)


@decision("plan")
def plan(goal: str) -> list[str]:
    check(search(goal))
    return ["search", "answer"]


def test_sequential_and_nested_calls() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a", run_id="run-1", links="sequence") as run:
        plan("weather")
        search("after")
    s, c, p, s2, closed = sink.records
    assert [r.kind for r in sink.records] == [
        "tool_call", "constraint_check", "plan", "tool_call", "run_closed",
    ]  # fmt: skip
    assert s.parent_digests == ()
    assert c.parent_digests == (sink.hex(s),)  # sequential inside plan
    assert p.parent_digests == (sink.hex(c),)  # plan depends on what ran inside it
    assert s2.parent_digests == (sink.hex(p),)  # the next call follows plan
    assert closed.parent_digests == (sink.hex(s2),)
    assert {r.run_id for r in sink.records} == {"run-1"} and run.run_id == "run-1"
    assert [e.record for e in run.entries] == sink.records
    assert_run_ok(sink)


def test_tool_call_payload_and_evidence() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a"):
        search("q")
    record = sink.records[0]
    args, result = content_digest({"query": "q"}), content_digest(["q-1", "q-2"])
    assert record.payload == ToolCall(
        tool=search.__qualname__, inputs_used=(args,), outputs_generated=(result,)
    )
    assert record.evidence == {"arguments": args, "result": result}
    assert record.parameters == {} and record.actual_outcome is None
    assert record.agent == "a"


def test_threads_fan_in_with_the_context_executor() -> None:
    sink = Sink()
    started = threading.Barrier(4, timeout=5)

    @decision("tool_call", name="fetch", capture="digest")
    def fetch(n: int) -> int:
        started.wait()  # all four calls have begun before any ends
        return n * n

    @decision("outcome", name="summarize")
    def summarize(values: list[int]) -> int:
        return sum(values)

    @decision("plan", name="step", steps=("fetch", "summarize"))
    def step() -> int:
        with ContextThreadPoolExecutor(4) as pool:
            values = list(pool.map(fetch, range(4)))
        return summarize(values)

    with ledger_run(sink, agent="a", links="sequence"):
        step()
        step()
    fetches = sink.by_kind("tool_call")
    summaries = sink.by_kind("outcome")
    plans = sink.by_kind("plan")
    assert len(fetches) == 8 and len(summaries) == 2 and len(plans) == 2
    first, second = fetches[:4], fetches[4:]
    assert all(f.parent_digests == () for f in first)
    assert set(summaries[0].parent_digests) == {sink.hex(f) for f in first}
    assert plans[0].parent_digests == (sink.hex(summaries[0]),)
    assert all(f.parent_digests == (sink.hex(plans[0]),) for f in second)
    assert set(summaries[1].parent_digests) == {sink.hex(f) for f in second}
    assert_run_ok(sink)


def test_plain_threads_join_the_only_open_run() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a") as run:
        seen: list[Run | None] = []

        def work() -> None:
            seen.append(current_run())
            search("from a thread")

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    assert seen == [run]
    assert sink.records[0].payload.KIND == "tool_call"
    assert_run_ok(sink)


def test_two_open_runs_are_not_guessed() -> None:
    sink = Sink()
    found: list[Run | None] = []

    def start_thread() -> None:
        thread = threading.Thread(target=lambda: found.append(current_run()))
        thread.start()
        thread.join()

    with ledger_run(sink, agent="a"), ledger_run(sink, agent="b") as inner:
        start_thread()  # started where run b is current: it carries run b
        contextvars.Context().run(start_thread)  # started where no run is current: no guess
    assert found == [inner, None]


def test_asyncio_tasks_fan_in() -> None:
    sink = Sink()

    @decision("tool_call", name="lookup")
    async def lookup(key: str, ready: asyncio.Barrier) -> str:
        await ready.wait()
        return key.upper()

    @decision("handoff")
    async def delegate(keys: list[str]) -> str:
        ready = asyncio.Barrier(len(keys))
        await asyncio.gather(*(lookup(k, ready) for k in keys))
        return "agent-b"

    async def agent() -> Run:
        async with ledger_run(sink, agent="a", links="sequence") as run:
            await delegate(["x", "y", "z"])
            await asyncio.create_task(delegate(["w"]))
        return run

    run = asyncio.run(agent())
    lookups = sink.by_kind("tool_call")
    handoffs = sink.by_kind("handoff")
    assert [h.payload.to_agent for h in handoffs] == ["agent-b", "agent-b"]  # type: ignore[union-attr]
    assert set(handoffs[0].parent_digests) == {sink.hex(r) for r in lookups[:3]}
    assert lookups[3].parent_digests == (sink.hex(handoffs[0]),)
    assert handoffs[1].parent_digests == (sink.hex(lookups[3]),)
    assert run.closed is not None
    assert_run_ok(sink)


def test_an_exception_becomes_an_outcome_record() -> None:
    sink = Sink()

    @decision("tool_call", name="flaky", capture="digest")
    def flaky(n: int) -> int:
        raise ValueError("secret detail")

    with ledger_run(sink, agent="a", links="sequence"):
        with pytest.raises(ValueError):
            flaky(1)
        search("next")
    failed, after, _ = sink.records
    assert failed.kind == "outcome"
    assert failed.actual_outcome == {
        "error": "ValueError",
        "decision": "tool_call",
        "name": "flaky",
    }
    assert failed.evidence == {"arguments": content_digest({"n": 1})}
    assert "secret detail" not in failed.to_json()
    assert after.parent_digests == (sink.hex(failed),)
    assert_run_ok(sink)


def test_async_cancellation_is_recorded() -> None:
    sink = Sink()

    started = asyncio.Event()

    @decision("tool_call", name="slow")
    async def slow() -> None:
        started.set()
        await asyncio.sleep(10)  # cancelled here

    async def agent() -> None:
        async with ledger_run(sink, agent="a"):
            task = asyncio.create_task(slow())
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(agent())
    assert sink.records[0].actual_outcome["error"] == "asyncio.exceptions.CancelledError"  # type: ignore[index,call-overload]
    assert_run_ok(sink)


def test_a_failing_run_body_is_recorded_and_the_run_closed() -> None:
    sink = Sink()
    with pytest.raises(KeyError), ledger_run(sink, agent="a"):
        search("x")
        raise KeyError("k")
    assert [r.kind for r in sink.records] == ["tool_call", "outcome", "run_closed"]
    assert sink.records[1].actual_outcome == {"error": "KeyError"}
    assert_run_ok(sink)


def test_capture_content_puts_values_in_clear() -> None:
    sink = Sink()

    @decision("parameter_construction", capture="content", tool="web.search")
    def build(query: str, limit: int = 5) -> dict[str, Any]:
        return {"q": query, "n": limit}

    with ledger_run(sink, agent="a"):
        build("rain")
    record = sink.records[0]
    assert record.parameters == {"query": "rain", "limit": 5}
    assert record.actual_outcome == {"q": "rain", "n": 5}
    assert record.evidence["arguments"] == content_digest({"query": "rain", "limit": 5})


def test_capture_commit_keeps_clear_values_out_of_the_record() -> None:
    sink = Sink()

    @decision("tool_call", capture="commit", name="email")
    def email(address: str) -> str:
        return "sent to " + address

    with ledger_run(sink, agent="a") as run:
        email("alice@example.com")
    record = sink.records[0]
    text = record.to_json()
    assert "alice" not in text and record.evidence == {}
    disclosures = run.entries[0].disclosures
    assert [d.field_path for d in disclosures] == ["parameters.address", "actual_outcome"]
    assert sink.disclosures[record_digest(record)] == disclosures
    for d in disclosures:
        verify_disclosure(record, d, record_digest(record))
    assert disclosures[0].value == "alice@example.com"


def test_memory_write_and_callable_fields() -> None:
    sink = Sink()

    @decision("memory_write", trust_label="untrusted", source="tool:web", capture="digest")
    def remember(fact: str) -> str:
        return fact

    @decision(
        "tool_selection",
        candidates=lambda r: tuple(
            Candidate(id=c, action=f"call:{c}", score="0.5", rank=i + 1) for i, c in enumerate(r)
        ),
        selected=lambda r: r[0],
    )
    def choose() -> list[str]:
        return ["search", "mail"]

    with ledger_run(sink, agent="a", model="m-1"):
        remember("the sky is blue")
        choose()
    memory, selection, _ = sink.records
    assert memory.payload == MemoryWrite(
        key=remember.__qualname__,
        value="sha256:" + content_digest("the sky is blue"),
        source="tool:web",
        trust_label="untrusted",
    )
    assert selection.payload == ToolSelection()
    assert selection.selected == "search" and len(selection.candidates) == 2
    assert selection.model == "m-1"


def test_emit_inside_a_decorated_call_is_its_parent() -> None:
    sink = Sink()

    @decision("tool_call", name="act")
    def act() -> str:
        emit(ToolSelection(), candidates=(Candidate(id="x", action="x", score="1", rank=1),))
        return "done"

    with ledger_run(sink, agent="a"):
        act()
    selection, call, _ = sink.records
    assert call.parent_digests == (sink.hex(selection),)


def test_outside_a_run_the_call_is_not_recorded_but_warned() -> None:
    with pytest.warns(UnrecordedDecisionWarning, match="no ledger run"):
        assert search("x") == ["x-1", "x-2"]
    with pytest.raises(RunStateError, match="no ledger run"):
        emit(ToolSelection())


def test_a_closed_run_takes_no_records() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a") as run:
        pass
    with pytest.raises(RunStateError, match="closed"):
        run.emit(ToolSelection())
    with pytest.raises(RunStateError, match="already closed"):
        run.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UnrecordedDecisionWarning):
            search("late")


def test_decoration_errors_are_early_and_clear() -> None:
    with pytest.raises(ValueError, match="kind 'nope'"):
        decision("nope")
    with pytest.raises(TypeError, match="unknown fields"):
        decision("tool_call", colour="red")
    with pytest.raises(TypeError, match=r"trust_label=\.\.\."):
        decision("memory_write")
    with pytest.raises(TypeError, match="generator"):
        decision()(lambda: (yield))
    sink = Sink()

    @decision("handoff")
    def nowhere() -> None:
        return None

    with ledger_run(sink, agent="a"), pytest.raises(TypeError, match="to_agent"):
        nowhere()


def test_invalid_fields_name_the_field() -> None:
    sink = Sink()

    @decision("tool_selection", candidates=(), selected="ghost")
    def bad() -> None:
        return None

    with ledger_run(sink, agent="a"), pytest.raises(InvalidRecordError, match="selected"):
        bad()


def test_methods_leave_self_out() -> None:
    sink = Sink()

    class Agent:
        @decision("tool_call", name="m", capture="digest")
        def m(self, x: int) -> int:
            return x

    with ledger_run(sink, agent="a"):
        Agent().m(3)
    assert sink.records[0].evidence["arguments"] == content_digest({"x": 3})


def test_injected_clock_and_time_format() -> None:
    sink = Sink()
    with ledger_run(sink, agent="a", clock=lambda: 1_748_779_200.25):
        search("x")
    assert {r.time for r in sink.records} == {"2025-06-01T12:00:00.250Z"}
    assert rfc3339(0) == "1970-01-01T00:00:00.000Z"


# --- capture rules ----------------------------------------------------------------------------


@dataclasses.dataclass
class Point:
    x: int
    y: float


def test_jsonable_rules() -> None:
    assert jsonable({"a": (1, 2), 3: None}) == {"a": [1, 2], "3": None}
    assert jsonable(b"\x00\x01") == {"base64": "AAE="}
    assert jsonable(2**60) == repr(2**60) and jsonable(float("nan")) == "nan"
    assert jsonable({3, 1, 2}) == [1, 2, 3]
    assert jsonable(Point(1, 2.5)) == {"x": 1, "y": 2.5}
    assert jsonable(Candidate(id="i", action="a", score="1", rank=1)) == {
        "id": "i", "action": "a", "score": "1", "rank": 1,
    }  # fmt: skip
    assert isinstance(jsonable(object()), str)


def test_content_digest_is_sha256_of_canonical_json() -> None:
    value = {"b": [1, "x"], "a": 1.5}
    assert content_digest(value) == hashlib.sha256(canonical_bytes(value)).hexdigest()
    assert content_digest({"a": 1.5, "b": [1, "x"]}) == content_digest(value)


def test_capture_value_modes() -> None:
    digest = capture_value("v", Capture.DIGEST, "actual_outcome")
    assert digest.value is None and digest.digest == content_digest("v")
    content = capture_value("v", Capture.CONTENT, "actual_outcome")
    assert content.value == "v" and content.digest == digest.digest
    committed = capture_value("v", Capture.COMMIT, "actual_outcome")
    assert committed.disclosure is not None and committed.disclosure.value == "v"
    assert committed.digest == committed.value.digest.hex() != digest.digest


def test_the_core_sdk_imports_no_framework() -> None:
    code = (
        "import sys, ledger_client.sdk, ledger_client.bridges; "
        "tops = {m.split('.')[0] for m in sys.modules}; "
        "print(sorted(tops & {'langchain_core', 'opentelemetry'}))"
    )
    done = processes.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
