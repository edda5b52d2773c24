"""Issue 26 without a server: agent signatures on records (schema v2), chain links, the chain
scan over a log's digests, and the signature/chain checks in every auditor's view.

The runs are the SDK's (``ledger_run`` with a sink that seals through the real
``AgentIdentity``: key file, chain state file, beacons); receipts are real ones of an
in-memory log (tests/receipt_world.py)."""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import InvalidRecordError
from ledger.fileio.keys import write_signer
from ledger.records import decision as records
from ledger.records.agent import (
    AGENT_RECORD_CONTEXT,
    agent_chain_key,
    sign_record,
    signing_bytes,
    verify_record_signature,
)
from ledger.records.decision import ChainLink, DecisionRecord, ToolCall, record_digest
from ledger_client.audit.chain import ChainRun, scan_chains
from ledger_client.cli.main import main
from ledger_client.sdk.agent import AgentIdentity
from tests.agent_sink import Sink
from tests.verdict_world import LEAF_S, agent, write_run

T = "2026-12-01T12:00:00.000Z"


def record(step: int = 1, **extra: Any) -> DecisionRecord:
    return DecisionRecord(
        record_id=records.new_record_id(),
        run_id="r1",
        step=step,
        time=T,
        agent="bot",
        payload=ToolCall(tool="search"),
        **extra,
    )


class SealingSink(Sink):
    """The test sink, sealing records as ``LedgerClient.seal`` does (the real identity)."""

    def __init__(self, identity: AgentIdentity) -> None:
        super().__init__()
        self.identity = identity
        self.beacons: list[bytes] = []

    def seal(self, record: DecisionRecord) -> DecisionRecord:
        return self.identity.seal(record, self.beacons.append)


def identity(tmp_path: Path, name: str = "agent-a") -> tuple[AgentIdentity, Ed25519Signer]:
    signer = Ed25519Signer.generate(name)
    write_signer(tmp_path / f"{name}.key", signer)
    return AgentIdentity(tmp_path / f"{name}.key", tmp_path / f"{name}.chain"), signer


def signed_run(sink: SealingSink, shift: float = 0) -> list[DecisionRecord]:
    start = len(sink.records)
    ticks = itertools.count()
    agent(sink, lambda: LEAF_S + shift + next(ticks))
    return sink.records[start:]


# --- signatures --------------------------------------------------------------------------------


def test_a_signature_covers_everything_but_itself() -> None:
    signer, other = Ed25519Signer.generate("agent-a"), Ed25519Signer.generate("agent-a")
    signed = sign_record(record(), signer)
    assert signing_bytes(signed).startswith(AGENT_RECORD_CONTEXT)
    assert b'"signature"' not in signing_bytes(signed)
    assert verify_record_signature(signed, [signer.verifier()])[0] is None
    # rotation: any of several keys
    assert verify_record_signature(signed, [other.verifier(), signer.verifier()])[0] is None
    # another key of the same name, a changed field, a removed signature
    refused = str(verify_record_signature(signed, [other.verifier()])[0])
    assert "not a trusted agent key" in refused  # same name, another key ID
    changed = DecisionRecord.from_json_obj({**signed.to_json_obj(), "agent": "mallory"})
    assert "bad signature" in str(verify_record_signature(changed, [signer.verifier()])[0])
    bare = DecisionRecord.from_json_obj({**signed.to_json_obj(), "signature": None})
    assert verify_record_signature(bare, [signer.verifier()])[0] == "unsigned"
    named = Ed25519Signer.generate("agent-b")
    assert "not a trusted agent key" in str(verify_record_signature(signed, [named.verifier()])[0])
    # the signature is in the record, so in its digest, and it round-trips
    assert record_digest(signed) != record_digest(bare)
    assert DecisionRecord.from_json(signed.to_json()) == signed


def test_older_records_still_read_and_the_agent_members_are_checked() -> None:
    v3 = record().to_json_obj()
    v1 = {k: v for k, v in v3.items() if k in records.record_fields(1)}
    v1["schema"] = "ledger.decision/v1"
    v2 = {k: v for k, v in v3.items() if k in records.record_fields(2)}
    v2["schema"] = "ledger.decision/v2"
    assert DecisionRecord.from_json_obj(v2).to_json_obj() == v2
    with pytest.raises(InvalidRecordError, match=r"^chain: unknown field"):
        DecisionRecord.from_json_obj({**v2, "chain": None})
    old = DecisionRecord.from_json_obj(v1)
    assert old.to_json_obj() == v1 and record_digest(old) == record_digest(
        DecisionRecord.from_json(json.dumps(v1))
    )
    with pytest.raises(InvalidRecordError, match=r"^signature: unknown field"):
        DecisionRecord.from_json_obj({**v1, "signature": None})
    link = ChainLink(id="ab" * 16, seq=3, tag="cd" * 16)
    with pytest.raises(InvalidRecordError, match=r"^chain: only a run's first record"):
        record(step=1, chain=link)
    with pytest.raises(InvalidRecordError, match="genesis"):
        record(step=0, chain=ChainLink(id="ab" * 16, seq=0, tag="cd" * 16))
    with pytest.raises(InvalidRecordError, match="genesis"):
        record(step=0, chain=ChainLink(id="ab" * 16, seq=2, tag="cd" * 16, genesis="x"))
    bad = {**v3, "signature": {"key": "a", "key_id": "zz", "sig": "x"}}
    with pytest.raises(InvalidRecordError, match=r"^signature\.key_id"):
        DecisionRecord.from_json_obj(bad)


# --- the SDK's chain state and the scan --------------------------------------------------------


def test_the_sdk_opens_runs_in_a_line_and_the_scan_finds_them(tmp_path: Path) -> None:
    me, signer = identity(tmp_path)
    sink = SealingSink(me)
    runs = [signed_run(sink) for _ in range(4)]
    assert [r[0].chain.seq for r in runs if r[0].chain] == [0, 1, 2, 3]
    assert runs[0][0].chain is not None and runs[0][0].chain.genesis is not None
    assert all(r.signature is not None for run in runs for r in run)
    assert len(sink.beacons) == 5  # a genesis, and one opening per run
    state = json.loads((tmp_path / "agent-a.chain").read_text())
    assert state["next"] == 4 and (tmp_path / "agent-a.chain").stat().st_mode & 0o077 == 0
    # the log: beacons and records interleaved with others' entries
    log = [*sink.beacons, *(record_digest(r) for r in sink.records), b"\x01" * 32]
    leaves = list(enumerate(log))
    ka = agent_chain_key(signer)
    presented = [ChainRun(first=r[0], closed=True, source=f"run{i}") for i, r in enumerate(runs)]
    report = scan_chains(leaves, ka, presented)
    assert report.ok and report.chains[0].head == 3
    assert {c.status for c in report.run_checks.values()} == {"ok"}
    # withheld run #2: a gap naming its index
    report = scan_chains(leaves, ka, presented[:2] + presented[3:])
    assert [g["seq"] for g in report.gaps] == [2] and not report.ok
    assert report.gaps[0]["index"] == 3  # genesis, #0, #1, #2
    # a run claiming #2 whose opening is not in the log: unlogged
    fake = DecisionRecord.from_json_obj({**runs[2][0].to_json_obj(), "agent": "other"})
    report = scan_chains(leaves, ka, [*presented[:2], ChainRun(first=fake, closed=True)])
    assert [u["code"] for u in report.unlogged] == ["unlogged"]
    # another agent's chain key finds nothing of it
    assert scan_chains(leaves, b"\x00" * 32, []).chains == []


def test_a_number_taken_but_never_used_is_skipped_not_a_gap(tmp_path: Path) -> None:
    me, signer = identity(tmp_path)
    sink = SealingSink(me)
    first = signed_run(sink)
    assert me.chain is not None
    with me.chain.locked():
        me.chain.advance()  # the agent died after taking #1 and before spooling anything
    second = signed_run(sink)
    assert second[0].chain is not None and second[0].chain.seq == 2
    leaves = list(enumerate(sink.beacons))
    runs = [ChainRun(first=first[0], closed=True), ChainRun(first=second[0], closed=True)]
    report = scan_chains(leaves, agent_chain_key(signer), runs)
    assert report.ok and report.chains[0].head == 2 and not report.gaps


# --- every view shows the agent key and the chain position -------------------------------------


def invoke_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(main, [*args, "--json"])
    return result.exit_code, json.loads(result.output)


def test_signature_and_chain_checks_in_every_view(tmp_path: Path) -> None:
    me, signer = identity(tmp_path)
    run = signed_run(SealingSink(me))
    path = tmp_path / "run.jsonl"
    trust = write_run(path, run)
    base = ["--key", trust["key"], "--tsa-root", trust["root"]]
    vkey = signer.verifier().key_string()
    code, out = invoke_json("run", str(path), *base, "--agent-key", vkey, "--timeline")
    assert code == 0, out
    assert out["agent"]["signature"]["status"] == "ok" and out["agent"]["chain"]["seq"] == 0
    row0 = out["timeline"][0]["verdict"]["checks"]
    assert {"name": "signature", "status": "ok"}.items() <= row0[4].items()
    assert row0[5]["name"] == "chain" and row0[5]["message"].startswith("chain ")
    text = CliRunner().invoke(main, ["run", str(path), *base]).output
    assert "signature by agent-a+" in text and "chain:         chain " in text
    # the report and lineage: the run's checks name the key and the position
    html = tmp_path / "r.html"
    assert (
        CliRunner().invoke(main, ["report", str(path), *base, "--html", str(html)]).exit_code == 0
    )
    page = html.read_text()
    assert "<b>signature</b>" in page and "agent-a+" in page and "<b>chain</b>" in page
    # the index stores each record's verdict with both checks
    db = str(tmp_path / "audit.sqlite")
    assert (
        CliRunner()
        .invoke(main, ["index", str(tmp_path), "--db", db, "--key", trust["key"]])
        .exit_code
        == 0
    )

    with sqlite3.connect(db) as conn:
        stored = [
            json.loads(v)
            for (v,) in conn.execute(
                "SELECT v.text FROM records r JOIN verdicts v ON v.id = r.verdict"
            )
        ]
    names = {c["name"] for v in stored for c in v["checks"]}
    assert {"signature", "chain"} <= names
    # another key of the same name fails every record
    other = Ed25519Signer.generate("agent-a").verifier().key_string()
    code, out = invoke_json("run", str(path), *base, "--agent-key", other)
    assert code == 1 and {p["code"] for p in out["problems"]} == {"signature"}
    assert len(out["problems"]) == len(run)
    # report and lineage take --agent-key too: the wrong key fails the run there
    bad = tmp_path / "bad.html"
    result = CliRunner().invoke(
        main, ["report", str(path), *base, "--agent-key", other, "--html", str(bad)]
    )
    assert result.exit_code == 1 and "not a trusted agent key" in bad.read_text()
    start = record_digest(run[0]).hex()
    code, out = invoke_json("lineage", str(path), *base, "--agent-key", vkey, "--from", start)
    assert code == 0, out
    code, out = invoke_json("lineage", str(path), *base, "--agent-key", other, "--from", start)
    assert code == 1, out


def test_agent_key_and_chain_usage_errors_are_one_line(tmp_path: Path) -> None:
    key = tmp_path / "a.key"
    assert (
        CliRunner().invoke(main, ["agent-key", "create", "bot", "--out", str(key)]).exit_code == 0
    )
    again = CliRunner().invoke(main, ["agent-key", "create", "bot", "--out", str(key)])
    assert again.exit_code == 2 and "refusing to overwrite" in again.output
    key.chmod(0o644)
    shown = CliRunner().invoke(main, ["agent-key", "show", str(key)])
    assert shown.exit_code == 2 and "chmod 600" in shown.output
    assert "Traceback" not in shown.output
    log = Ed25519Signer.generate("log.example").verifier().key_string()
    run = tmp_path / "run.jsonl"
    run.write_text("")
    base = ["chain", str(run), "--tiles", "file:///nowhere/", "--key", log]
    bad_key = CliRunner().invoke(main, [*base, "--chain-key", "xyz"])
    assert bad_key.exit_code == 2 and "--chain-key" in bad_key.output
    private = Ed25519Signer.generate("bot").key_string()
    leaked = CliRunner().invoke(main, [*base, "--chain-key", "00" * 32, "--agent-key", private])
    assert leaked.exit_code == 2 and private not in leaked.output
    named = Ed25519Signer.generate("log.example").verifier().key_string()
    confused = CliRunner().invoke(main, [*base, "--chain-key", "00" * 32, "--agent-key", named])
    assert confused.exit_code == 2 and "named like the log" in confused.output
    unread = CliRunner().invoke(main, [*base, "--chain-key", "00" * 32])
    assert unread.exit_code == 2 and "Traceback" not in unread.output
