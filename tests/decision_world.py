"""Runs with real receipts (in-memory log, Ed25519 checkpoints, RFC 3161 anchors from a generated
TSA) for the decision views, search and export: a decision run (a tool selection among three
scored candidates, one committed; an outcome that is a schema mismatch; a tool call whose output
is a known text; an untrusted memory write and a record resting on it), a 17-step chain, and a
30-record fan-out/fan-in graph whose first record names the chain's last as its parent (a link
across runs). ``write`` writes them as run files plus the decision run's disclosures file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.records.commitments import Disclosure, commit
from ledger.records.decision import (
    Candidate,
    Cost,
    DecisionRecord,
    MemoryWrite,
    OtelContext,
    Outcome,
    ToolCall,
    ToolSelection,
    Usage,
    new_record_id,
    record_digest,
)
from ledger.records.links import derived_by_evidence
from ledger.records.runs import run_closed_record, run_steps
from ledger_client.sdk.capture import content_digest
from tests.receipt_world import T0, World, filler, write_private_and_root

DECIDE = "01a30000-0000-7000-8000-000000000001"
CHAIN = "01a30000-0000-7000-8000-000000000002"
FAN = "01a30000-0000-7000-8000-000000000003"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
FINAL_TEXT = "The refund of 120 EUR was approved under policy P-7 for order 5531."
SECRET_ACTION = "escalate to a human reviewer"
QUERY_TEXT = "refund order 5531"
PROMPT = "a" * 64


@dataclass
class Runs:
    world: World
    runs: dict[str, list[DecisionRecord]]
    disclosures: dict[str, list[Disclosure]]

    def digest(self, record: DecisionRecord) -> str:
        return record_digest(record).hex()


def _record(run: str, step: int, payload: Any, parents: list[DecisionRecord], **kw: Any) -> Any:
    second = step % 60
    rand = (step + len(run) * 7 + ord(run[-1])).to_bytes(10, "big")
    return DecisionRecord(
        record_id=new_record_id(now_ms=T0 + step, rand=rand),
        run_id=run,
        step=step,
        time=f"2025-06-15T15:{6 + step // 60:02d}:{second:02d}Z",
        agent={DECIDE: "decider", CHAIN: "chainer", FAN: "fanner"}[run],
        parent_digests=tuple(record_digest(p).hex() for p in parents),
        payload=payload,
        **kw,
    )


def _closed(run: str, body: list[DecisionRecord]) -> list[DecisionRecord]:
    agent = body[0].agent
    return [*body, run_closed_record(run, run_steps(body), agent=agent, time=body[-1].time)]


def _decide() -> tuple[list[DecisionRecord], dict[int, list[Disclosure]]]:
    action, action_open = commit(SECRET_ACTION, field_path="candidates[2].action")
    query, query_open = commit(QUERY_TEXT, field_path="parameters.query")
    select = _record(
        DECIDE, 0, ToolSelection(), [],
        model="gpt-test-1",
        otel=OtelContext(trace_id=TRACE, span_id=SPAN),
        evidence={"prompt": PROMPT},
        candidates=(
            Candidate(id="refund", action="call refund_api", score="0.91", rank=1),
            Candidate(id="ask", action="ask the customer", score="0.42", rank=2),
            Candidate(id="human", action=action, score="0.10", rank=3),
        ),
        selected="refund",
        parameters={"query": query, "tags": ["billing", "prod"], "temperature": 0.2},
        expected_outcome={"schema": "refund/v2"},
        actual_outcome={"status": "schema_mismatch", "got": "refund/v1"},
        started_at="2025-06-15T15:05:58.000Z", ended_at="2025-06-15T15:05:59.250Z",
        usage=Usage(input_tokens=1200, output_tokens=300, total_tokens=1500),
        cost=Cost(amount="0.0150", currency="USD"),
        model_parameters={"top_p": 0.9, "max_tokens": 512},
    )  # fmt: skip
    call = _record(
        DECIDE, 1,
        ToolCall(tool="refund_api", inputs_used=(content_digest({"order": 5531}),),
                 outputs_generated=(content_digest(FINAL_TEXT),)),
        [select], model="gpt-test-1", otel=OtelContext(trace_id=TRACE, span_id="00f067aa0ba902b8"),
        expected_outcome="approved", actual_outcome="approved",
        usage=Usage(input_tokens=100, output_tokens=20), cost=Cost(amount="0.0025", currency="USD"),
    )  # fmt: skip
    web = _record(
        DECIDE, 2, MemoryWrite(key="note", value="pasted from a forum", source="web",
                               trust_label="untrusted"), [call],
    )  # fmt: skip
    after = _record(
        DECIDE, 3, Outcome(), [web], actual_outcome="reviewed",
        evidence=derived_by_evidence([record_digest(web).hex()]),  # an inferred link
    )  # fmt: skip
    return _closed(DECIDE, [select, call, web, after]), {0: [action_open, query_open]}


def _chain() -> list[DecisionRecord]:
    body: list[DecisionRecord] = []
    for step in range(17):
        body.append(_record(CHAIN, step, ToolCall(tool=f"step_{step}"), body[-1:]))
    return _closed(CHAIN, body)


# The 30 records of the fan graph by layer, and each record's parents (indexes into the list).
FAN_PARENTS: tuple[tuple[int, ...], ...] = (
    (),  # 0: the root (its parent is the chain's last record, in another run)
    *((0,) for _ in range(6)),  # 1-6: fan-out
    (1, 2, 3, 4, 5, 6),  # 7: fan-in
    *((7,) for _ in range(5)),  # 8-12
    (8, 10), (9, 11, 12), (8, 12), (7, 13),  # 13-16: mixed, one long edge 7 -> 16
    (13, 14, 15, 16),  # 17
    *((17,) for _ in range(4)),  # 18-21
    (0, 18, 19), (20, 21), (1, 22),  # 22-24: long edges from 0 and 1
    (22, 23, 24), (25,), (25, 3), (26, 27), (28, 6, 16),  # 25-29
)  # fmt: skip


def _fan(chain_last: DecisionRecord) -> list[DecisionRecord]:
    body: list[DecisionRecord] = []
    for step, parents in enumerate(FAN_PARENTS):
        linked = [body[p] for p in parents] if step else [chain_last]
        body.append(_record(FAN, step, ToolCall(tool=f"node_{step}"), linked))
    return _closed(FAN, body)


def build() -> Runs:
    decide, opened = _decide()
    chain = _chain()
    fan = _fan(chain[-2])
    runs = {DECIDE: decide, CHAIN: chain, FAN: fan}
    every = [r for records in runs.values() for r in records]
    world = World([*filler(3, "decide"), *(record_digest(r) for r in every)])
    disclosures = {record_digest(decide[i]).hex(): ds for i, ds in opened.items()}
    return Runs(world, runs, disclosures)


def item(runs: Runs, record: DecisionRecord) -> dict[str, Any]:
    digest = record_digest(record)
    index = next(i for i, leaf in enumerate(runs.world.leaves) if leaf[9:41] == digest)
    receipt = runs.world.receipt(index, len(runs.world.leaves), record=record)
    return {"record": record.to_json_obj(), "receipt": receipt.to_json_obj()}


def write(folder: Path, runs: Runs | None = None) -> dict[str, Path]:
    """``decide.jsonl``, ``chain.jsonl``, ``fan.jsonl``, ``decide.disclosures.jsonl`` and
    ``root.pem`` (beside the folder)."""
    runs = runs or build()
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, run in (("decide", DECIDE), ("chain", CHAIN), ("fan", FAN)):
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps(item(runs, r)) + "\n" for r in runs.runs[run]))
        out[name] = path
    return out | write_private_and_root(folder, "decide.disclosures.jsonl", runs.disclosures)
