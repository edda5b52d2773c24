"""The field classification holds everywhere (docs/formats.md "Field classification"): a sensitive
string planted in every str/bytes argument that the classification commits, across every public
SDK function and bridge callback (enumerated from their signatures, not hand-picked), is found
in clear in none of: the logged records, the run file, the spool, the index database, the HTML
report, the query export, or the server's log. The arguments kept in clear are listed here with
their class; a new argument in neither list fails ``test_every_argument_is_classified``."""

from __future__ import annotations

import base64
import collections.abc
import inspect
import json
import re
import sqlite3
import typing
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import ledger_client.sdk as sdk
from ledger.core.checkpoint import Ed25519Signer
from ledger.fileio.keys import write_signer
from ledger.records.decision import (
    Candidate,
    MemoryWrite,
    Outcome,
    Plan,
    Termination,
    ToolSelection,
)
from ledger_client.cli.main import main
from ledger_client.sdk import propagate
from ledger_client.sdk.client import LedgerClient, SenderOptions
from ledger_client.sdk.context import emit, ledger_run
from ledger_client.sdk.decorators import decision
from tests.harness import ORIGIN, ServerProcess

pytestmark = pytest.mark.integration

# --- the classification of every data-carrying argument ------------------------------------------

# Kept in clear (docs/formats.md "Field classification"), each with its class.
CLEAR: dict[str, str] = {
    "ledger_run.agent": "identity: agent",
    "ledger_run.run_id": "identity: run",
    "ledger_run.model": "model id",
    "Run.__init__.agent": "identity: agent",
    "Run.__init__.run_id": "identity: run",
    "Run.__init__.model": "model id",
    "LedgerClient.__init__.chain_genesis": "chain.genesis: why a new chain started",
    "Run.child.inputs": "parent links (digests)",
    "derived_from.parents": "parent links (digests)",
    "decision.parents": "parent links (digests)",
    "emit.parents": "parent links (digests)",
    "Run.emit.parents": "parent links (digests)",
    "decision.kind": "kind",
    "decision.name": "tool name",
    "LedgerCallbackHandler.on_chain_start.serialized": "tool name (the name member only)",
    "LedgerCallbackHandler.on_tool_start.serialized": "tool name (the name member only)",
    "LedgerCallbackHandler.on_llm_start.serialized": "tool name (the name member only)",
    "LedgerCallbackHandler.on_chat_model_start.serialized": "tool name (the name member only)",
    "LedgerCallbackHandler.on_retriever_start.serialized": "tool name (the name member only)",
    "LedgerCallbackHandler.on_custom_event.name": "kind (selects memory_write)",
}
# Never recorded: configuration, paths, digests, helpers that return a value to the caller.
NOT_RECORDED: dict[str, str] = {
    "ledger_run.receipts": "configuration: a path",
    "ledger_run.disclosures": "configuration: a path",
    "ledger_run.disclose": "configuration: field paths",
    "ledger_run.links": "configuration",
    "Run.__init__.links": "configuration",
    "Run.write_disclosures.path": "configuration: a path",
    "Run.write_pending.path": "configuration: a path",
    "Run.write_receipts.path": "configuration: a path",
    "Run.write_receipts.disclose": "configuration: field paths",
    "Run.receipts.disclose": "configuration: field paths",
    "Run.emit.clear": "configuration: names kept in clear",
    "Run.finish.clear": "configuration: names kept in clear",
    "emit.clear": "configuration: names kept in clear",
    "decision.clear": "configuration: names kept in clear",
    "decision.capture": "configuration",
    "LedgerClient.__init__.address": "configuration",
    "LedgerClient.__init__.spool": "configuration: a path",
    "LedgerClient.__init__.agent_key": "configuration: a key file path (signs, never recorded)",
    "LedgerClient.__init__.chain": "configuration: the chain state file's path",
    "LedgerClient.__init__.witnesses": "configuration",
    "LedgerClient.receipt.digest": "a digest",
    "LedgerClient.receipts.digests": "digests",
    "LedgerClient.anchored_receipts.digests": "digests",
    "AsyncLedgerClient.__init__.address": "configuration",
    "AsyncLedgerClient.__init__.kwargs": "configuration",
    "AsyncLedgerClient.receipt.digest": "a digest",
    "AsyncLedgerClient.receipts.digests": "digests",
    "AsyncLedgerClient.anchored_receipts.digests": "digests",
    "content_digest.value": "returned to the caller, never recorded",
    "jsonable.value": "returned to the caller, never recorded",
    "derived_from.value": "returned unchanged; only a link is kept",
    "ledger_process.args": "handed to the child's own calls (their rules apply)",
    "ledger_process.context": "configuration",
    "LedgerCallbackHandler.__init__.capture": "configuration",
    "LedgerSpanProcessor.__init__.capture": "configuration",
    "LedgerCallbackHandler.on_chain_start.inputs": "no record: chains are frames",
    "LedgerCallbackHandler.on_chain_end.outputs": "no record: chains are frames",
}
# Committed: each is planted below (``plant``) and must be found in clear nowhere.
COMMITTED = (
    "decorated function arguments",
    "decorated function result",
    "decision.fields",
    "emit.fields",
    "Run.emit.fields",
    "Run.finish.fields",
    "LedgerCallbackHandler.on_tool_start.input_str",
    "LedgerCallbackHandler.on_tool_start.inputs",
    "LedgerCallbackHandler.on_tool_end.output",
    "LedgerCallbackHandler.on_llm_start.prompts",
    "LedgerCallbackHandler.on_chat_model_start.messages",
    "LedgerCallbackHandler.on_llm_end.response",
    "LedgerCallbackHandler.on_retriever_start.query",
    "LedgerCallbackHandler.on_retriever_end.documents",
    "LedgerCallbackHandler.on_agent_action.action",
    "LedgerCallbackHandler.on_agent_finish.finish",
    "LedgerCallbackHandler.on_custom_event.data",
    "LedgerSpanProcessor.on_end.span",
)
# ``**kwargs`` of the LangChain callbacks: run ids, tags, metadata (model name and settings).
FRAMEWORK_KWARGS = "framework metadata: ids, tags, model id and settings (clear)"


def _carries_text(annotation: object) -> bool:
    if isinstance(annotation, str):  # an annotation only type checkers resolve
        return re.search(r"\b(str|bytes|Any|object)\b", annotation) is not None
    if annotation in (str, bytes, typing.Any, object, inspect.Parameter.empty):
        return True
    if isinstance(annotation, typing.TypeVar):
        return True
    if typing.get_origin(annotation) is collections.abc.Callable:
        return False  # code, not data
    return any(_carries_text(a) for a in typing.get_args(annotation))


def _own(fn: object) -> bool:
    return getattr(fn, "__module__", "").startswith("ledger_client")


def public_callables() -> Iterator[tuple[str, Callable[..., Any]]]:
    """Every public SDK function and method, the propagation helpers and the bridge callbacks."""
    from ledger_client.bridges.langchain import LedgerCallbackHandler
    from ledger_client.bridges.otel import LedgerSpanProcessor

    classes = (sdk.Run, sdk.LedgerClient, sdk.AsyncLedgerClient, sdk.ContextThreadPoolExecutor)
    for name in sdk.__all__:
        found = getattr(sdk, name)
        if inspect.isfunction(found) and _own(found):
            yield name, found
    for name in propagate.__all__:
        found = getattr(propagate, name)
        if inspect.isfunction(found):
            yield name, found
    for cls in classes:
        for name, fn in vars(cls).items():
            if inspect.isfunction(fn) and (name == "__init__" or not name.startswith("_")):
                yield f"{cls.__name__}.{name}", fn
    for bridge in (LedgerCallbackHandler, LedgerSpanProcessor):
        for name, fn in vars(bridge).items():
            if inspect.isfunction(fn) and (name == "__init__" or name.startswith("on_")):
                yield f"{bridge.__name__}.{name}", fn


def data_arguments() -> dict[str, object]:
    """``function.argument`` -> annotation, for every argument that can carry text."""
    out: dict[str, object] = {}
    for name, fn in public_callables():
        try:
            hints = typing.get_type_hints(fn)
        except NameError:
            hints = {}
        for param in inspect.signature(fn).parameters.values():
            if param.name in ("self", "cls"):
                continue
            annotation = hints.get(param.name, param.annotation)
            if _carries_text(annotation):
                out[f"{name}.{param.name}"] = annotation
    return out


def test_every_argument_is_classified() -> None:
    found = data_arguments()
    kwargs = {
        n for n in found if n.startswith("LedgerCallbackHandler.on_") and n.endswith(".kwargs")
    }
    known = set(CLEAR) | set(NOT_RECORDED) | set(COMMITTED) | kwargs
    unclassified = sorted(set(found) - known)
    assert unclassified == [], (
        f"classify these arguments (clear, committed or not recorded): {unclassified}"
    )
    assert not set(CLEAR) & set(NOT_RECORDED) and not set(CLEAR) & set(COMMITTED)
    stale = sorted((set(CLEAR) | set(NOT_RECORDED)) - set(found))
    assert stale == [], f"no such argument any more: {stale}"
    assert all(CLEAR.values()) and all(NOT_RECORDED.values()) and FRAMEWORK_KWARGS


# --- the scan -----------------------------------------------------------------------------------


class Canaries:
    """One unique sensitive string per planted argument (and its bytes/base64 forms)."""

    def __init__(self) -> None:
        self.planted: dict[str, str] = {}

    def __call__(self, where: str) -> str:
        text = f"PII-{len(self.planted):02d}-{uuid.uuid4().hex[:10]}"
        self.planted[where] = text
        return text

    def forms(self) -> dict[str, list[str]]:
        return {
            where: [text, base64.b64encode(text.encode()).decode()[:12]]
            for where, text in self.planted.items()
        }


def plant(c: Canaries, run: sdk.Run) -> None:
    """Every committed-class argument gets its canary."""

    @decision("tool_call")
    def lookup(query: str, blob: bytes) -> str:
        return c("decorated function result")

    lookup(c("decorated function arguments"), c("decorated function arguments/bytes").encode())

    @decision("termination")
    def stop() -> str:
        return c("decision result as termination reason")

    @decision("plan")
    def plan() -> list[str]:
        return [c("decision result as plan step")]

    @decision("termination", reason=c("decision.fields"))
    def stop_given() -> None:
        return None

    @decision(
        "tool_selection",
        candidates=[Candidate(id="a", action=c("decision.fields/candidate"), score="1", rank=1)],
        expected_outcome=c("decision.fields/expected"),
    )
    def choose() -> None:
        return None

    @decision("memory_write", trust_label="untrusted")
    def remember(note: str) -> str:
        return note

    for fn in (stop, plan, stop_given, choose):
        fn()
    remember(c("decorated memory value"))
    emit(Termination(reason=c("emit.fields")))
    emit(Plan(steps=(c("emit.fields/plan"),)))
    emit(
        Outcome(),
        parameters={"q": c("emit.fields/parameter")},
        expected_outcome=c("emit.fields/expected"),
        actual_outcome={"text": c("emit.fields/actual")},
    )
    emit(MemoryWrite(key="k", value=c("emit.fields/memory"), source="s", trust_label="t"))
    emit(
        ToolSelection(),
        candidates=(Candidate(id="a", action=c("emit.fields/candidate"), score="1", rank=1),),
        selected="a",
    )
    run.emit(Termination(reason=c("Run.emit.fields")))
    frame = run.child()
    run.finish(frame, Outcome(), actual_outcome=c("Run.finish.fields"))
    plant_langchain(c)
    plant_otel(c)


def plant_langchain(c: Canaries) -> None:
    from langchain_core.agents import AgentAction, AgentFinish
    from langchain_core.documents import Document
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, LLMResult

    from ledger_client.bridges.langchain import LedgerCallbackHandler

    h = LedgerCallbackHandler()
    pre = "LedgerCallbackHandler."
    tool, llm, chat, retriever, agent = (uuid.uuid4() for _ in range(5))
    h.on_chain_start({"name": "agent"}, {"input": "x"}, run_id=agent)
    h.on_tool_start(
        {"name": "search"}, "unused when inputs are given", run_id=tool, parent_run_id=agent,
        inputs={"q": c(pre + "on_tool_start.inputs")},
    )  # fmt: skip
    h.on_tool_end(c(pre + "on_tool_end.output"), run_id=tool)
    second = uuid.uuid4()
    h.on_tool_start({"name": "search"}, c(pre + "on_tool_start.input_str"), run_id=second)
    h.on_tool_end("done", run_id=second)
    h.on_llm_start({"name": "m"}, [c(pre + "on_llm_start.prompts")], run_id=llm)
    reply = AIMessage(
        content=c(pre + "on_llm_end.response"),
        tool_calls=[{"name": "search", "args": {"q": c(pre + "on_llm_end.response/args")},
                     "id": "c1"}],
    )  # fmt: skip
    h.on_llm_end(LLMResult(generations=[[ChatGeneration(message=reply)]]), run_id=llm)
    messages = [[HumanMessage(content=c(pre + "on_chat_model_start.messages"))]]
    h.on_chat_model_start({"name": "m"}, messages, run_id=chat)
    h.on_llm_end(LLMResult(generations=[[ChatGeneration(message=AIMessage("ok"))]]), run_id=chat)
    h.on_retriever_start({"name": "notes"}, c(pre + "on_retriever_start.query"), run_id=retriever)
    h.on_retriever_end(
        [Document(page_content=c(pre + "on_retriever_end.documents"))], run_id=retriever
    )
    action = AgentAction(tool="search", tool_input=c(pre + "on_agent_action.action"), log="")
    h.on_agent_action(action, run_id=agent)
    values = {"output": c(pre + "on_agent_finish.finish")}
    h.on_agent_finish(AgentFinish(return_values=values, log=""), run_id=agent)
    memory = {"key": "k", "value": c(pre + "on_custom_event.data"), "trust_label": "t"}
    h.on_custom_event("ledger.memory_write", memory, run_id=agent)
    h.on_chain_end({"output": "x"}, run_id=agent)


def plant_otel(c: Canaries) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from ledger_client.bridges.otel import LedgerSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(LedgerSpanProcessor())
    tracer = provider.get_tracer("scan")
    span = "LedgerSpanProcessor.on_end.span"
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([{"role": "user", "content": c(span + "/input")}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
            {"type": "text", "content": c(span + "/output")}]}]),
    }  # fmt: skip
    tool = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
        "gen_ai.tool.call.arguments": c(span + "/arguments"),
        "gen_ai.tool.call.result": c(span + "/result"),
    }  # fmt: skip
    memory = {"ledger.memory.key": "k", "ledger.memory.value": c(span + "/memory")}
    for name, attributes in (("chat", chat), ("tool", tool), ("memory", memory)):
        with tracer.start_as_current_span(name, attributes=attributes):
            pass
    provider.shutdown()


def cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_no_committed_argument_is_found_in_clear_anywhere(tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    pytest.importorskip("opentelemetry.sdk")
    key = tmp_path / "signer.key"
    signer = Ed25519Signer.generate(ORIGIN)
    write_signer(key, signer)
    runs = tmp_path / "runs"
    runs.mkdir()
    run_file = runs / "scan.jsonl"
    spool = tmp_path / "agent.spool"
    canaries = Canaries()
    server = ServerProcess(tmp_path / "data", key)
    try:
        client = LedgerClient(server.address, spool=spool, options=SenderOptions(batch_age=0.01))
        try:
            with ledger_run(client, agent="scan-agent", receipts=run_file) as run:
                plant(canaries, run)
            spooled = spool.read_bytes() if spool.exists() else b""
        finally:
            client.close()
    finally:
        server.terminate()
    verifier = signer.verifier().key_string()
    db = tmp_path / "audit.sqlite"
    cli("index", str(runs), "--db", str(db), "--key", verifier)
    exported = cli("query", "--db", str(db), "--json")
    html = tmp_path / "report.html"
    cli("report", str(run_file), "--key", verifier, "--html", str(html))
    with sqlite3.connect(db) as conn:
        dumped = "\n".join(conn.iterdump())
    places = {
        "records and run file": run_file.read_text(),
        "spool": spooled.decode("utf-8", "replace"),
        "index database": dumped + db.read_bytes().decode("utf-8", "replace"),
        "query export": exported,
        "HTML report": html.read_text(),
        "server log": server.log_path.read_text(),
    }
    # the planted values were captured (kept privately), so their absence below means something
    private = (runs / "scan.disclosures.jsonl").read_text()
    forms = canaries.forms()
    missing = [w for w in canaries.planted if not any(f in private for f in forms[w])]
    assert missing == [], f"not captured at all: {missing}"
    assert {w.split("/")[0] for w in canaries.planted} >= set(COMMITTED)
    found = [
        f"{where} in {place}"
        for where, forms in forms.items()
        for place, text in places.items()
        if any(form in text for form in forms)
    ]
    assert "scan-agent" in places["records and run file"]  # the scan reads the right files
    assert found == [], found
