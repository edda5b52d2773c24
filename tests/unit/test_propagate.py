"""The run context across plain threads and child processes (docs/sdk.md "Threads and
processes"): calls made there land in the right run, with their parents, while two runs are
open; the helpers ``in_context`` and ``ledger_process``."""

from __future__ import annotations

import contextvars
import threading
import warnings

from ledger.records.decision import ToolCall, record_digest
from ledger_client.sdk.context import RunContext, in_context, ledger_run
from ledger_client.sdk.decorators import UnrecordedDecisionWarning, decision
from ledger_client.sdk.propagate import ledger_process
from tests.agent_sink import Sink, assert_run_ok, child_work


@decision("tool_call")
def step(text: str) -> str:
    return text[::-1]


def in_thread(text: str) -> None:
    worker = threading.Thread(target=step, args=(text,))  # a plain thread
    worker.start()
    worker.join()


def test_plain_threads_land_in_their_starters_run_while_two_runs_are_open() -> None:
    sinks = {"a": Sink(), "b": Sink()}
    contexts = {name: contextvars.copy_context() for name in sinks}
    opened: dict[str, RunContext] = {}
    for name, sink in sinks.items():
        opened[name] = ledger_run(sink, agent=name, links="sequence")
        contexts[name].run(opened[name].__enter__)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnrecordedDecisionWarning)  # lost = the old behaviour
        for name in ("a", "b", "a"):
            contexts[name].run(in_thread, f"from {name}")
    for name in sinks:
        contexts[name].run(opened[name].__exit__, None, None, None)
    a_calls = [r for r in sinks["a"].records if isinstance(r.payload, ToolCall)]
    b_calls = [r for r in sinks["b"].records if isinstance(r.payload, ToolCall)]
    assert len(a_calls) == 2 and len(b_calls) == 1
    assert a_calls[1].parent_digests == (record_digest(a_calls[0]).hex(),)
    assert {r.run_id for r in sinks["a"].records} == {opened["a"].run.run_id}
    for sink in sinks.values():
        assert_run_ok(sink)


def test_in_context_binds_a_callable_to_the_run() -> None:
    sink, other = Sink(), Sink()
    with ledger_run(sink, agent="a", links="sequence"):
        bound = in_context(step)
        with ledger_run(other, agent="b"):
            runner = threading.Thread(target=bound, args=("x",))
            runner.start()
            runner.join()
    assert sum(isinstance(r.payload, ToolCall) for r in sink.records) == 1


def test_a_child_process_lands_in_the_parents_run_with_its_parents() -> None:
    sink, other = Sink(), Sink()
    with ledger_run(other, agent="other"), ledger_run(sink, agent="p", links="sequence") as run:
        step("before")
        child = ledger_process(child_work, "from the child", context="spawn")
        child.join(120)
        assert child.exitcode == 0
        step("after")
    before, in_child, after, closing = sink.records
    assert isinstance(in_child.payload, ToolCall) and in_child.payload.tool == "child_step"
    assert in_child.run_id == run.run_id and in_child.step == 1
    assert in_child.parent_digests == (record_digest(before).hex(),)
    assert after.parent_digests == (record_digest(in_child).hex(),)
    assert "FROM THE CHILD" not in in_child.to_json()  # committed in the child, kept by the parent
    assert run.entries[1].disclosures and closing.kind == "run_closed"
    assert [r.kind for r in other.records] == ["run_closed"]
    assert_run_ok(sink)
