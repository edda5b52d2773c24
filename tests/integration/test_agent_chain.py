"""Issue 26 end to end: agent-signed records and per-agent chains, against a real log server
(RocksDB, gRPC, the HTTP tiles endpoint) with real Ed25519 keys; the CLIs run in process.

Each test plays a dishonest agent (a re-run presented instead of the original, a record left
unsigned, a record signed with another key, a chain state rewound to reuse a number) or an
honest one that crashes (killed mid-run, chain state lost), and checks what an auditor sees.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from ledger.core.checkpoint import Ed25519Signer
from ledger.records.agent import agent_chain_key, sign_record
from ledger.records.decision import DecisionRecord, Outcome, ToolCall
from ledger_client.cli.main import main as verify
from ledger_client.sdk.client import LedgerClient
from ledger_client.sdk.context import emit, ledger_run
from ledger_client.sdk.run_file import RunLine, spooled_run, write_run_file
from tests import processes
from tests.harness import ORIGIN, QUICK, running_server


def run_verify(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(verify, [*args, "--json"])
    return result.exit_code, json.loads(result.output.strip().splitlines()[-1])


def agent_key(tmp_path: Path, name: str) -> tuple[Path, str, str]:
    """A new agent key file made by ``ledger-verify agent-key create``: (file, vkey, chain key)."""
    path = tmp_path / f"{name}.key"
    code, out = run_verify("agent-key", "create", name, "--out", str(path))
    assert code == 0, out
    assert path.stat().st_mode & 0o077 == 0
    return path, out["agent_key"], out["chain_key"]


def client(tmp_path: Path, address: str, name: str, **agent: Any) -> LedgerClient:
    spool = tmp_path / f"{name}.spool"
    return LedgerClient(address, spool=spool, options=QUICK, register_atexit=False, **agent)


def one_run(sdk: LedgerClient, path: Path, agent: str = "bot") -> Path:
    with ledger_run(sdk, agent=agent, receipts=path, links="sequence"):
        emit(ToolCall(tool="search"))
        emit(Outcome(), actual_outcome={"ok": True})
    return path


def chain_check(
    url: str, key: str, chain_key: str, *files: Path, agent: str | None = None
) -> tuple[int, dict[str, Any]]:
    extra = [] if agent is None else ["--agent-key", agent]
    paths = [str(f) for f in files]
    return run_verify("chain", *paths, "--tiles", url, "--key", key, "--chain-key", chain_key,
                      "--origin", ORIGIN, *extra)  # fmt: skip


class PartlySigned:
    """A dishonest writer: a real client that signs every record but step ``skip`` (which it
    sends unsigned, or signed with ``other`` when given)."""

    def __init__(
        self, sdk: LedgerClient, signer: Ed25519Signer, skip: int, other: Ed25519Signer | None
    ) -> None:
        self.sdk, self.signer, self.skip, self.other = sdk, signer, skip, other

    def seal(self, record: DecisionRecord) -> DecisionRecord:
        if record.step != self.skip:
            return sign_record(record, self.signer)
        return record if self.other is None else sign_record(record, self.other)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sdk, name)


def test_signed_runs_verify_with_the_agent_key_and_forgeries_fail(tmp_path: Path) -> None:
    with running_server(tmp_path / "data") as (server, _, log_signer):
        key = log_signer.verifier().key_string()
        key_file, vkey, _ = agent_key(tmp_path, "agent-a")
        _, other_vkey, _ = agent_key(tmp_path, "agent-b")
        sdk = client(tmp_path, server.address, "a", agent_key=key_file)
        signed = one_run(sdk, tmp_path / "signed.jsonl")
        code, report = run_verify("run", str(signed), "--key", key, "--agent-key", vkey)
        assert code == 0, report
        assert report["agent"]["signature"]["status"] == "ok"
        assert all(
            any(c["name"] == "signature" and c["status"] == "ok" for c in r["verdict"]["checks"])
            for r in report["records_checked"]
        )
        # rotation: the old key and the new one both given
        code, report = run_verify(
            "run", str(signed), "--key", key, "--agent-key", other_vkey, "--agent-key", vkey
        )
        assert code == 0, report
        # a verifier given another agent's key refuses every record
        code, report = run_verify("run", str(signed), "--key", key, "--agent-key", other_vkey)
        assert code == 1 and {p["code"] for p in report["problems"]} == {"signature"}, report
        # unsigned: a run logged by anyone with write access, in the agent's name
        plain = client(tmp_path, server.address, "plain")
        unsigned = one_run(plain, tmp_path / "unsigned.jsonl")
        code, report = run_verify("run", str(unsigned), "--key", key, "--agent-key", vkey)
        assert code == 1 and len(report["problems"]) == 3, report
        assert "unsigned" in report["problems"][0]["message"]
        # one record left unsigned, or re-signed with another key, by a dishonest writer
        signer = Ed25519Signer.from_key_string((tmp_path / "agent-a.key").read_text())
        thief = Ed25519Signer.generate("agent-a")  # same name, another key
        for name, other in (("one-unsigned", None), ("one-resigned", thief)):
            writer = PartlySigned(plain, signer, 1, other)
            path = one_run(writer, tmp_path / f"{name}.jsonl")  # type: ignore[arg-type]
            code, report = run_verify("run", str(path), "--key", key, "--agent-key", vkey)
            assert code == 1, report
            assert [p["step"] for p in report["problems"]] == [1], report
        # an agent key named like the log is refused
        named_like_log = Ed25519Signer.generate(ORIGIN).verifier().key_string()
        code, report = run_verify("run", str(signed), "--key", key, "--agent-key", named_like_log)
        assert code == 2 and "named like the log" in report["error"], report
        # a crashed run (no run_closed) still verifies record by record
        crashed = tmp_path / "crashed.jsonl"
        with ledger_run(sdk, agent="bot", links="sequence") as run:
            emit(ToolCall(tool="search"))
            assert sdk.flush(30, checkpoint=True)
            entries = run.entries  # the run is still open: no run_closed record
            found = sdk.receipts([e.digest for e in entries])
            write_run_file(
                crashed,
                [
                    RunLine(record=e.record, receipt=replace(r, record=e.record))
                    for e, r in zip(entries, found, strict=True)
                ],
            )
            code, report = run_verify("run", str(crashed), "--key", key, "--agent-key", vkey)
            assert code == 1 and all(
                c["status"] == "ok"
                for r in report["records_checked"]
                for c in r["verdict"]["checks"]
                if c["name"] == "signature"
            ), report
        sdk.close()
        plain.close()


AGENT = """
import sys, threading
from ledger_client.sdk.client import LedgerClient, Backoff, SenderOptions
from ledger_client.sdk.context import emit, ledger_run
from ledger.records.decision import ToolCall
address, spool, key, chain = sys.argv[1:5]
options = SenderOptions(batch_age=0.01, backoff=Backoff(initial=0.02, maximum=0.2))
sdk = LedgerClient(address, spool=spool, options=options, agent_key=key, chain=chain)
context = ledger_run(sdk, agent="bot", links="sequence")
context.__enter__()
emit(ToolCall(tool="search"))
emit(ToolCall(tool="fetch"))
assert sdk.flush(30, checkpoint=True)
print("ready", flush=True)
threading.Event().wait()
"""


def test_chains_show_gaps_forks_lines_crashes_and_restarts(tmp_path: Path) -> None:
    with running_server(tmp_path / "data") as (server, _, log_signer):
        key, url = log_signer.verifier().key_string(), server.app.tiles_url
        assert url is not None

        # 1. a re-run presented instead of the failing original: a gap found in the tiles
        key_file, vkey, ck = agent_key(tmp_path, "gap-bot")
        sdk = client(tmp_path, server.address, "gap", agent_key=key_file,
                     chain=tmp_path / "gap.chain")  # fmt: skip
        first = one_run(sdk, tmp_path / "gap-0.jsonl")
        one_run(sdk, tmp_path / "gap-1-original.jsonl")
        rerun = one_run(sdk, tmp_path / "gap-2-rerun.jsonl")
        assert sdk.flush(30, checkpoint=True)
        code, report = chain_check(url, key, ck, first, rerun, agent=vkey)
        assert code == 1, report
        assert [(g["seq"], g["code"]) for g in report["gaps"]] == [(1, "gap")]
        assert "run #1 of chain" in report["gaps"][0]["message"]
        assert "is not among the files" in report["gaps"][0]["message"]
        assert report["chains"][0]["head"] == 2 and not report["forks"]
        code, report = chain_check(url, key, ck, first, tmp_path / "gap-1-original.jsonl", rerun)
        assert code == 0 and not report["gaps"], report
        sdk.close()

        # 2. two concurrent runs of one agent form a line, not a fork
        key_file, _, ck = agent_key(tmp_path, "line-bot")
        sdk = client(tmp_path, server.address, "line", agent_key=key_file,
                     chain=tmp_path / "line.chain")  # fmt: skip
        barrier = threading.Barrier(2)

        def concurrent(i: int) -> None:
            with ledger_run(sdk, agent="bot", receipts=tmp_path / f"line-{i}.jsonl"):
                barrier.wait(10)
                emit(ToolCall(tool=f"t{i}"))

        threads = [threading.Thread(target=concurrent, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sdk.flush(30, checkpoint=True)
        code, report = chain_check(
            url, key, ck, tmp_path / "line-0.jsonl", tmp_path / "line-1.jsonl"
        )
        assert code == 0 and not report["forks"] and not report["gaps"], report
        assert report["chains"][0]["head"] == 1
        sdk.close()

        # 3. a dishonest agent rewinds its chain state: two runs with one number are a fork
        key_file, _, ck = agent_key(tmp_path, "fork-bot")
        state = tmp_path / "fork.chain"
        sdk = client(tmp_path, server.address, "fork", agent_key=key_file, chain=state)
        zero = one_run(sdk, tmp_path / "fork-0.jsonl")
        saved = state.read_bytes()
        one_run(sdk, tmp_path / "fork-1a.jsonl")
        state.write_bytes(saved)
        twin = one_run(sdk, tmp_path / "fork-1b.jsonl")
        assert sdk.flush(30, checkpoint=True)
        code, report = chain_check(url, key, ck, zero, twin)
        assert code == 1 and [f["seq"] for f in report["forks"]] == [1], report
        assert "opened 2 times" in report["forks"][0]["message"]
        sdk.close()

        # 4. an honest agent killed mid-run: "not closed", neither a gap nor a fork
        key_file, _, ck = agent_key(tmp_path, "crash-bot")
        spool = tmp_path / "crash.spool"
        proc = processes.spawn(
            [sys.executable, "-c", AGENT, server.address, str(spool), str(key_file),
             str(tmp_path / "crash.chain")],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        processes.kill_group(proc)
        processes.wait(proc, 30)
        proc.stdout.close()
        presented = write_run_file(tmp_path / "crash.jsonl", spooled_run(spool))
        code, report = chain_check(url, key, ck, presented)
        assert code == 0 and not report["gaps"] and not report["forks"], report
        assert [n["seq"] for n in report["not_closed"]] == [0]
        (only,) = report["runs"].values()
        assert only["status"] == "warning" and "not closed" in only["message"]

        # 5. chain state lost: a new chain whose run 0 names the reason: "chain restarted"
        key_file, _, ck = agent_key(tmp_path, "restart-bot")
        state = tmp_path / "restart.chain"
        sdk = client(tmp_path, server.address, "restart", agent_key=key_file, chain=state)
        before = one_run(sdk, tmp_path / "restart-0.jsonl")
        state.unlink()
        after = one_run(sdk, tmp_path / "restart-1.jsonl")
        assert sdk.flush(30, checkpoint=True)
        code, report = chain_check(url, key, ck, before, after)
        assert code == 0 and not report["forks"] and not report["gaps"], report
        assert [c["restarted"] for c in report["chains"]] == [False, True]
        assert "no chain state" in report["chains"][1]["reason"]
        restarted = [r for r in report["runs"].values() if "restarted" in r["message"]]
        assert len(restarted) == 1 and restarted[0]["status"] == "warning"
        # the chain key is derived from the agent key; `agent-key show` prints it again
        code, shown = run_verify("agent-key", "show", str(key_file))
        assert code == 0 and shown["chain_key"] == ck
        signer = Ed25519Signer.from_key_string(key_file.read_text())
        assert agent_chain_key(signer).hex() == ck
        sdk.close()
