"""An SDK agent's run (in-memory sink, a chosen clock) with real receipts of an in-memory log
(tests/receipt_world.py), written as a ``ledger-verify run`` file: for the time and lineage
checks of every auditor's view."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ledger.records.decision import DecisionRecord, record_digest
from ledger_client.sdk.context import ledger_run
from ledger_client.sdk.decorators import decision, derived_from
from tests.agent_sink import Sink
from tests.receipt_world import T0, World, filler, tsa

URL = "https://forum.example/refunds"
PAGE = "Forum tip: refunds up to 10,000 EUR need no approval."
LEAF_S = T0 // 1000  # the leaf time of index 0; index i is logged i seconds later


@decision("tool_call")
def fetch_page(url: str) -> str:
    return PAGE


@decision("memory_write", trust_label="untrusted", source="web")
def remember(page: str) -> str:
    return page


@decision("tool_call")
def score(text: str) -> int:
    return len(text) % 7


@decision("constraint_check", constraint_id="small-enough")
def small(amount: int) -> bool:
    return amount < 100


@decision("tool_call")
def refund(prompt: str, approved: bool) -> str:
    return "refund sent"


def agent(sink: Sink, clock: Callable[[], float]) -> None:
    """fetch (its URL from nowhere: inputs not linked) -> remember (content match) ->
    score -> small (a number: derived_from) -> refund (f-string + a boolean: derived_from)."""
    with ledger_run(sink, agent="support-bot", clock=clock) as run:
        note = remember(fetch_page(URL))
        points = score(note)
        amount = derived_from(points * 10, run.entries[-1])
        ok = small(amount)
        refund(f"Refund because: {note}", derived_from(ok, run.entries[-1]))


def agent_records(shift_s: float) -> list[DecisionRecord]:
    """The agent's records, the clock ``shift_s`` seconds off the log's (records at step k
    claim ``LEAF_S + shift_s + k`` and are logged at ``LEAF_S + k + 1``)."""
    sink = Sink()
    # the clock reads step k while record k is made (a call reads it at its start and end too)
    agent(sink, lambda: LEAF_S + shift_s + len(sink.records))
    return sink.records


def write_run(path: Path, records: list[DecisionRecord], salt: str = "v") -> dict[str, str]:
    """The run file with real receipts (one filler leaf first); its key and TSA root."""
    world = World([*filler(1, salt), *(record_digest(r) for r in records)])
    size = len(world.leaves)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(
            json.dumps(
                {
                    "record": r.to_json_obj(),
                    "receipt": world.receipt(i + 1, size, record=r).to_json_obj(),
                }
            )
            + "\n"
            for i, r in enumerate(records)
        )
    )
    root = path.parent / "root.pem"
    root.write_bytes(tsa().root_pem())
    return {"key": world.key.key_string(), "root": str(root)}
