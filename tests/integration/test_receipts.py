"""Receipts against a real server with the embedded TSA: fetch, verify offline, check runs, upgrade.

Records are real ``DecisionRecord`` objects; receipts come from ``fetch_receipt`` and are checked
by ``ledger-verify receipt`` / ``run`` against the embedded TSA's root (``<data>/tsa/root.pem``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.core import merkle
from ledger.core.errors import NotFoundError, RecordError
from ledger.records.commitments import commit
from ledger.records.decision import DecisionRecord, MemoryWrite, new_record_id, record_digest
from ledger.records.runs import run_closed_record, run_steps
from ledger_client.cli.main import main
from ledger_client.receipts.receipt import Receipt, to_tlog_proof
from ledger_client.remote.log import RemoteLog
from ledger_client.remote.receipt_fetch import fetch_receipt, upgrade_receipt
from tests.harness import running_server
from tests.receipt_world import TIME, make_record

pytestmark = pytest.mark.integration


def build_run(run: str, n: int) -> list[DecisionRecord]:
    body: list[DecisionRecord] = []
    for step in range(n):
        parents = [record_digest(body[-1]).hex()] if body else []
        body.append(make_record(step, run=run, parents=parents))
    closing = run_closed_record(run, run_steps(body), agent="agent-r", time=TIME)
    return [*body, closing]


def append(log: RemoteLog, records: Sequence[DecisionRecord]) -> list[int]:
    out = log.append([record_digest(r) for r in records], wait_for_checkpoint=True)
    return [r.index for r in out.results]


def cli(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(main, [*args, "--json"])
    payload: dict[str, Any] = json.loads(result.output)
    return result.exit_code, payload


def item(record: DecisionRecord, receipt: Receipt) -> dict[str, Any]:
    return {"record": record.to_json_obj(), "receipt": receipt.to_json_obj()}


def write_folder(where: Path, entries: Sequence[dict[str, Any]]) -> str:
    where.mkdir(parents=True)
    for n, entry in enumerate(entries):
        (where / f"{n:02d}.json").write_text(json.dumps(entry))
    return str(where)


def write_jsonl(path: Path, entries: Sequence[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return str(path)


def codes(payload: dict[str, Any]) -> list[str]:
    return sorted(p["code"] for p in payload["problems"])


def test_receipts_runs_and_upgrades(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data, embedded_tsa=True) as (_, log, signer):
        key = signer.verifier().key_string()
        root = str(data / "tsa" / "root.pem")
        check = ["--key", key, "--tsa-root", root]

        run = build_run("run-int", 4)
        intruder = make_record(7, run="run-int")  # same run, logged, never listed
        late = build_run("run-late", 3)
        late_order = [late[0], late[2], late[1], late[3]]  # step 2 logged before step 1
        secret, disclosure = commit("user@example.com", field_path="payload.value")
        private = DecisionRecord(
            record_id=new_record_id(),
            run_id="run-private",
            step=0,
            time=TIME,
            agent="agent-r",
            payload=MemoryWrite(key="email", value=secret, source="user", trust_label="pii"),
        )
        indexes = append(log, [*run[:-1], intruder, run[-1], *late_order, private])
        assert indexes == sorted(indexes)
        first_size, anchors, failures = log.anchor_now()
        assert failures == [] and [a.tsa for a in anchors] == ["embedded-dev"]

        receipts = {record_digest(r): fetch_receipt(log, record_digest(r), record=r)
                    for r in [*run, intruder, *late]}  # fmt: skip
        assert all(r.tree_size == first_size and r.anchors for r in receipts.values())

        # one receipt, offline, against the embedded TSA's root
        one = receipts[record_digest(run[1])]
        path = tmp_path / "one.json"
        path.write_text(one.to_json())
        code, out = cli("receipt", str(path), *check)
        assert code == 0, out
        assert out["index"] == indexes[1] and out["tree_size"] == first_size
        assert out["anchors"][0]["unauthenticated_label"] == "embedded-dev" and out["anchored_by"]
        assert out["anchored_at"] >= out["logged_at"][:19]

        # the record's digest only, a disclosed field, a wrong record
        digest_only = fetch_receipt(log, record_digest(private), disclosures=())
        assert digest_only.record is None
        disclosed = fetch_receipt(log, record_digest(private), record=private,
                                  disclosures=[disclosure])  # fmt: skip
        path.write_text(disclosed.to_json())
        code, out = cli("receipt", str(path), *check)
        assert code == 0 and out["disclosed"] == ["payload.value"]
        with pytest.raises(RecordError):
            fetch_receipt(log, record_digest(private), record=run[0])

        # the c2sp.org/tlog-proof@v1 export verifies with the other subcommand
        proof_file = tmp_path / "one.tlog-proof"
        proof_file.write_text(to_tlog_proof(one).to_text())
        leaf_hash = merkle.leaf_hash(one.leaf).hex()
        code, out = cli("tlog-proof", str(proof_file), "--key", key, "--leaf-hash", leaf_hash)
        assert code == 0, out

        # runs: complete, then removed / inserted / altered / reordered
        entries = [item(r, receipts[record_digest(r)]) for r in run]
        code, out = cli("run", write_folder(tmp_path / "complete", entries), *check)
        assert code == 0 and out["records"] == 5 and out["receipts_valid"] == 5, out
        code, out = cli("run", write_jsonl(tmp_path / "complete.jsonl", entries), *check)
        assert code == 0, out

        removed = [e for n, e in enumerate(entries) if n != 2]
        code, out = cli("run", write_folder(tmp_path / "removed", removed), *check)
        assert code == 1 and codes(out) == ["missing", "missing_parent"]

        inserted = [*entries, item(intruder, receipts[record_digest(intruder)])]
        code, out = cli("run", write_jsonl(tmp_path / "inserted.jsonl", inserted), *check)
        assert code == 1 and codes(out) == ["after_close", "extra"]  # its step is after the close
        assert {p["record_id"] for p in out["problems"]} == {intruder.record_id}

        altered = json.loads(json.dumps(entries))
        altered[3]["record"]["agent"] = "mallory"
        code, out = cli("run", write_folder(tmp_path / "altered", altered), *check)
        assert code == 1 and codes(out) == ["altered", "invalid_receipt", "missing_parent"]
        named = {p["code"]: p["step"] for p in out["problems"]}
        assert named == {"altered": 3, "invalid_receipt": 3, "missing_parent": 4}

        reordered = [item(r, receipts[record_digest(r)]) for r in late]
        code, out = cli("run", write_folder(tmp_path / "reordered", reordered), *check)
        assert code == 1 and codes(out) == ["parent_logged_later", "reordered"]

        # more appends: a receipt before the next anchor has no anchor yet
        more = build_run("run-more", 2)
        append(log, more)
        fresh = fetch_receipt(log, record_digest(more[0]), record=more[0])
        assert fresh.anchors == () and fresh.tree_size > first_size
        path.write_text(fresh.to_json())
        assert cli("receipt", str(path), "--key", key)[0] == 0
        code, out = cli("receipt", str(path), *check)
        assert code == 3 and "carries no anchor" in out["error"]  # anchors pending
        assert out["status"] == "anchors_pending"

        # upgrade to the newer anchored checkpoint: fresh inclusion + consistency, both checkable
        with pytest.raises(NotFoundError):
            upgrade_receipt(log, one)
        second_size, _, failures = log.anchor_now()
        assert failures == [] and second_size > first_size
        upgraded = upgrade_receipt(log, one)
        assert upgraded.tree_size == second_size and upgraded.previous is not None
        assert upgraded.previous.checkpoint == one.checkpoint
        assert upgraded.leaf == one.leaf and upgraded.index == one.index
        path.write_text(upgraded.to_json())
        code, out = cli("receipt", str(path), *check)
        assert code == 0, out
        assert out["previous_size"] == first_size and out["tree_size"] == second_size
        sizes = [(a["checkpoint_size"], a["status"]) for a in out["anchors"]]
        assert sizes == [(second_size, "valid"), (first_size, "valid")]
        assert out["anchors"][1]["gen_time"] == out["anchored_at"]  # the earliest anchor
        assert fetch_receipt(log, record_digest(run[1])).tree_size == first_size  # earliest
        newest = fetch_receipt(log, record_digest(more[0]))
        assert newest.tree_size == second_size and newest.anchors
        latest = upgrade_receipt(log, one, anchored=False)
        assert latest.tree_size == second_size and latest.anchors
        with pytest.raises(NotFoundError):  # already at the newest checkpoint
            upgrade_receipt(log, fresh)
