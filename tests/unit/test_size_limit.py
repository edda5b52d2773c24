"""The one size limit (docs/formats.md "Size limit"): the SDK refuses a record one byte over
``MAX_RECORD_BYTES``; a record exactly at it passes the SDK and every reader (``run`` over a
JSON-lines file and a folder, ``receipt`` with ``--record``, ``lineage``, ``report``,
``index``/``query``; ``disclose --digest`` reads run files with the same ``load_run``).
Receipts come from ``tests/receipt_world`` (real leaves, proofs, Ed25519 checkpoints and
RFC 3161 anchors)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.core.jcs import canonical_bytes
from ledger.core.limits import (
    MAX_ITEM_BYTES,
    MAX_RECEIPT_BYTES,
    MAX_RECEIPT_OVERHEAD,
    MAX_RECORD_BYTES,
)
from ledger.records.decision import DecisionRecord, Outcome, new_record_id, record_digest
from ledger.records.runs import run_closed_record, run_steps
from ledger_client.cli.main import main
from ledger_client.sdk.client import LedgerClient, RecordTooLargeError
from tests.harness import QUICK, free_port
from tests.receipt_world import T0, TIME, World, tsa

RUN = "run-big"


def sized(total: int, step: int = 0) -> DecisionRecord:
    """A record whose RFC 8785 form is exactly ``total`` bytes (ASCII padding)."""

    def record(pad: int) -> DecisionRecord:
        return DecisionRecord(
            record_id=new_record_id(now_ms=T0 + step, rand=bytes(10)),
            run_id=RUN, step=step, time=TIME, agent="agent-big", payload=Outcome(),
            actual_outcome="x" * pad,
        )  # fmt: skip

    base = len(canonical_bytes(record(0).to_json_obj()))
    made = record(total - base)
    assert len(made.to_json().encode()) == total
    return made


def test_limits_are_one_constant_and_its_receipt_overhead() -> None:
    assert MAX_RECORD_BYTES == 1 << 20
    assert MAX_RECEIPT_BYTES == 2 * MAX_RECORD_BYTES + MAX_RECEIPT_OVERHEAD
    assert MAX_ITEM_BYTES == MAX_RECORD_BYTES + MAX_RECEIPT_BYTES
    assert MAX_ITEM_BYTES > 1 << 20  # never less than any earlier reader accepted
    schema = (
        Path(__file__).resolve().parents[2]
        / "ledger/records/schemas/decision-record-v1.schema.json"
    )
    assert f"at most {MAX_RECORD_BYTES} bytes" in json.loads(schema.read_text())["description"]


def test_the_sdk_refuses_one_byte_over_and_takes_the_limit() -> None:
    client = LedgerClient(
        f"127.0.0.1:{free_port()}", options=QUICK, register_atexit=False, close_timeout=0.1
    )
    try:
        at_limit = sized(MAX_RECORD_BYTES)
        assert client.submit(at_limit, block=False) == record_digest(at_limit)
        with pytest.raises(RecordTooLargeError, match=r"1048577 bytes .* limit of 1048576"):
            client.submit(sized(MAX_RECORD_BYTES + 1), block=False)
        assert client.pending == 1  # the refused record was spooled nowhere
    finally:
        client.close(0.1)


def write_run(tmp_path: Path) -> tuple[Path, dict[str, Any], World, DecisionRecord]:
    """A closed run whose first record is exactly at the limit, each record beside a receipt
    that carries it too (the largest item the SDK writes), anchored."""
    big = sized(MAX_RECORD_BYTES)
    closing = run_closed_record(RUN, run_steps([big]), agent="agent-big", time=TIME)
    world = World([record_digest(big), record_digest(closing)])
    items = [
        {"record": r.to_json_obj(), "receipt": world.receipt(i, 2, record=r).to_json_obj()}
        for i, r in enumerate((big, closing))
    ]
    path = tmp_path / "runs" / "big.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"".join(canonical_bytes(item) + b"\n" for item in items))
    return path, items[0], world, big


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_a_record_at_the_limit_passes_every_reader(tmp_path: Path) -> None:
    path, first, world, big = write_run(tmp_path)
    key = world.key.key_string()
    root = tmp_path / "root.pem"
    root.write_bytes(tsa().root_pem())
    line = path.read_bytes().splitlines()[0]
    assert MAX_RECORD_BYTES * 2 < len(line) <= MAX_ITEM_BYTES
    trust = ["--key", key, "--tsa-root", str(root)]
    code, out = invoke("run", str(path), *trust, "--json")
    assert code == 0 and json.loads(out)["status"] == "verified", out
    folder = tmp_path / "folder"
    folder.mkdir()
    for n, raw in enumerate(path.read_bytes().splitlines()):
        (folder / f"{n:03d}.json").write_bytes(raw)
    assert invoke("run", str(folder), *trust)[0] == 0
    receipt, record = tmp_path / "receipt.json", tmp_path / "record.json"
    receipt.write_bytes(canonical_bytes(first["receipt"]))
    record.write_bytes(big.to_json().encode())
    code, out = invoke("receipt", str(receipt), "--record", str(record), *trust)
    assert code == 0, out
    digest = record_digest(big).hex()
    code, out = invoke("lineage", str(path), *trust, "--from", digest)
    assert code == 0, out
    code, out = invoke("report", str(path), *trust, "--html", str(tmp_path / "r.html"))
    assert code == 0, out
    db = str(tmp_path / "audit.sqlite")
    code, out = invoke("index", str(path.parent), "--db", db, *trust)
    assert code == 0, out
    code, out = invoke("query", "--db", db, "--run", RUN, "--json")
    assert code == 0 and len(json.loads(out)["records"]) == 2, out


def test_readers_refuse_an_item_over_their_bound(tmp_path: Path) -> None:
    _, first, world, _ = write_run(tmp_path)
    padded = canonical_bytes(first)[:-1] + b" " * (MAX_ITEM_BYTES + 1) + b"}\n"
    over = tmp_path / "over.jsonl"
    over.write_bytes(padded)
    code, out = invoke("run", str(over), "--key", world.key.key_string(), "--json")
    assert code == 2 and f"longer than {MAX_ITEM_BYTES} bytes" in json.loads(out)["error"]
    receipt = tmp_path / "receipt.json"
    receipt.write_bytes(b" " * (MAX_ITEM_BYTES + 1))
    code, out = invoke("receipt", str(receipt), "--key", world.key.key_string())
    assert code == 2 and f"larger than {MAX_ITEM_BYTES} bytes" in out
