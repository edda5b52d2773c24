"""The agent SDK against a real log: decorated multi-threaded and asyncio agents whose runs pass
``ledger-verify run``; an agent killed mid-run whose spool re-sends everything exactly once; a
log stopped mid-run with nothing lost; the overflow policy; atexit delivery; no clear values in
the spool or on the wire."""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.core.checkpoint import Ed25519Signer
from ledger.fileio.keys import write_signer
from ledger.records.commitments import commit
from ledger.records.decision import DecisionRecord, MemoryWrite, new_record_id, record_digest
from ledger_client.cli.main import main
from ledger_client.receipts.verify import verify_receipt
from ledger_client.remote.log import RemoteLog
from ledger_client.sdk.client import (
    AsyncLedgerClient,
    Backoff,
    ContextThreadPoolExecutor,
    LedgerClient,
    SenderOptions,
    SpoolFullError,
    decision,
    ledger_run,
)
from ledger_client.sdk.spool import SpoolItem, read_spool
from tests import processes
from tests.harness import ORIGIN, QUICK, ServerProcess, free_port, running_server
from tests.waits import wait_until

pytestmark = pytest.mark.integration


def verify_run(path: Path, key: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["run", str(path), "--key", key, "--json"])
    report: dict[str, Any] = json.loads(result.output)
    assert result.exit_code == 0, report
    return report


def logged_digests(remote: RemoteLog, at_least: int = 0) -> list[bytes]:
    """The record digests of the log in order, once a checkpoint covers ``at_least`` of them."""
    wait_until(lambda: remote.checkpoint().size >= at_least, what=f"a checkpoint of {at_least}")
    size = remote.checkpoint().size
    return [e.record_digest for start in range(0, size, 1000) for e in remote.entries(start, 1000)]


def memory_record(n: int, value: str = "v") -> tuple[DecisionRecord, Any]:
    committed, disclosure = commit(value, field_path="payload.value")
    record = DecisionRecord(
        record_id=new_record_id(),
        run_id="direct",
        step=n,
        time="2026-01-01T00:00:00.000Z",
        agent="agent-d",
        payload=MemoryWrite(key="k", value=committed, source="user", trust_label="trusted"),
    )
    return record, disclosure


# --- agents written with the decorators --------------------------------------------------------


@decision("tool_call", name="fetch")
def fetch(n: int) -> int:
    time.sleep(0.001)
    return n * n


@decision("outcome", name="combine")
def combine(values: list[int]) -> int:
    return sum(values)


@decision("plan", name="step", steps=("fetch", "combine"))
def threaded_step(width: int) -> int:
    with ContextThreadPoolExecutor(width) as pool:
        return combine(list(pool.map(fetch, range(width))))


def test_threaded_agent_run_verifies(tmp_path: Path) -> None:
    with running_server(tmp_path / "data") as (server, _, _):
        client = LedgerClient(server.address, spool=tmp_path / "a.spool", options=QUICK)
        run_file = tmp_path / "run.jsonl"
        with ledger_run(client, agent="threaded", receipts=run_file, links="sequence") as run:
            for _ in range(3):
                threaded_step(4)
        assert client.close(5)
        report = verify_run(run_file, server.app.verifier_key)
    entries = run.entries
    assert report["records"] == len(entries) == 3 * (4 + 2) + 1
    assert [e.record.step for e in entries] == list(range(len(entries)))
    by_digest = {e.digest.hex(): e.record for e in entries}
    for combined in (e.record for e in entries if e.record.kind == "outcome"):
        parents = [by_digest[p] for p in combined.parent_digests]
        assert {p.kind for p in parents} == {"tool_call"}  # fan-in of its fetches
        assert len(parents) >= 1 and all(p.step < combined.step for p in parents)
    lines = [json.loads(line) for line in run_file.read_text().splitlines()]
    assert [line["record"] for line in lines] == [e.record.to_json_obj() for e in entries]


@decision("tool_call", name="lookup")
async def lookup(key: str) -> str:
    await asyncio.sleep(0.001)
    return key.upper()


@decision("handoff", name="delegate")
async def delegate(keys: list[str]) -> str:
    await asyncio.gather(*(lookup(k) for k in keys))
    return "agent-b"


def test_asyncio_agent_run_verifies(tmp_path: Path) -> None:
    with running_server(tmp_path / "data") as (server, _, signer):
        run_file = tmp_path / "run.jsonl"

        async def agent() -> tuple[list[Any], Any]:
            async with AsyncLedgerClient(server.address, spool=tmp_path / "a.spool") as client:
                async with ledger_run(client, agent="async", receipts=run_file) as run:
                    for n in range(3):
                        await delegate([f"k{n}-{i}" for i in range(3)])
                record, _ = memory_record(0)
                receipt = await client.append(record)
                return run.entries, receipt

        entries, receipt = asyncio.run(agent())
        report = verify_run(run_file, server.app.verifier_key)
    assert report["records"] == len(entries) == 3 * 4 + 1
    handoffs = [e for e in entries if e.record.kind == "handoff"]
    assert all(len(h.record.parent_digests) == 3 for h in handoffs)
    verify_receipt(receipt, [signer.verifier()])


def test_append_receipts_and_no_clear_values_in_spool_or_wire(tmp_path: Path) -> None:
    secret = "alice@example.com"
    with running_server(tmp_path / "data") as (server, _, signer):
        sent: list[list[bytes]] = []

        class Spy(RemoteLog):
            def append(self, digests: Any, **kwargs: Any) -> Any:
                sent.append(list(digests))
                return super().append(digests, **kwargs)

        client = LedgerClient(
            server.address, spool=tmp_path / "a.spool", connect=lambda: Spy(server.address)
        )
        record, disclosure = memory_record(0, secret)
        receipt = client.append(record, disclosures=[disclosure])
        spooled = (tmp_path / "a.spool").read_bytes()
        assert client.close(5)
        verify_receipt(receipt, [signer.verifier()], record=record)
        assert receipt.disclosures == (disclosure,) and receipt.index == 0
        assert sent == [[record_digest(record)]]
        assert secret.encode() not in spooled and disclosure.salt.hex().encode() not in spooled
        assert record.to_json().encode() in spooled

        asked = LedgerClient(server.address, spool=tmp_path / "b.spool", spool_disclosures=True)
        other, other_disclosure = memory_record(1, secret)
        asked.submit(other, disclosures=[other_disclosure])
        _, pending = read_spool(tmp_path / "b.spool")
        assert json.loads(pending[0].disclosures_json or b"") == [other_disclosure.to_json_obj()]
        assert asked.close(5)


# --- crashes and outages --------------------------------------------------------------------------

AGENT = """
import sys, threading
from ledger_client.sdk import LedgerClient, SenderOptions, decision, ledger_run
address, spool, mode, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

@decision("tool_call", name="work")
def work(n):
    return n + 1

# full batches of 50 go at once; a partial batch would wait an hour (only close() sends it).
# In "hang" mode each full batch is acknowledged before the next record is made: a batch taken
# while more than 50 wait leaves the rest due at once, so without this step the split between
# sent and spooled records would depend on timing.
options = SenderOptions(batch_size=50, batch_age=3600.0)
client = LedgerClient(address, spool=spool, options=options, close_timeout=10)
with ledger_run(client, agent="crashy") as run:
    for n in range(count):
        work(n)
        print(run.entries[-1].digest.hex(), flush=True)
        if mode == "hang" and (n + 1) % 50 == 0 and not client.sender.wait(n + 1, timeout=60):
            sys.exit(f"the batch ending at {n + 1} was not acknowledged within 60 s")
    if mode == "exit":
        sys.exit(0)  # no close(): the atexit hook delivers
    # every full batch acknowledged (and its ack in the spool), the partial one not sent
    print("acked", client.pending, flush=True)
    threading.Event().wait()  # until killed
"""


def start_agent(tmp_path: Path, address: str, mode: str, count: int) -> subprocess.Popen[str]:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    args = [sys.executable, str(script), address, str(tmp_path / "agent.spool"), mode, str(count)]
    return processes.spawn(args, stdout=subprocess.PIPE, text=True)


def read_digests(agent: subprocess.Popen[str], count: int) -> Iterator[bytes]:
    assert agent.stdout is not None
    for _ in range(count):
        yield bytes.fromhex(agent.stdout.readline().strip())


def test_killed_agent_spool_resends_everything_exactly_once(tmp_path: Path) -> None:
    """The agent is killed at a known point: 3 full batches acknowledged, 25 records only in
    its spool. A new client on that spool sends those 25, once each, and nothing else."""
    with running_server(tmp_path / "data") as (server, remote, _):
        agent = start_agent(tmp_path, server.address, "hang", 175)
        submitted = list(read_digests(agent, 175))
        assert agent.stdout is not None
        assert agent.stdout.readline().split() == ["acked", "25"]
        agent.send_signal(signal.SIGKILL)
        processes.wait(agent, 30)
        agent.stdout.close()
        acked, pending = read_spool(tmp_path / "agent.spool")
        assert [i.digest for i in acked] == submitted[:150]
        assert [i.digest for i in pending] == submitted[150:]
        before = logged_digests(remote, 150)
        assert before == submitted[:150]  # nothing of the last 25 reached the log

        client = LedgerClient(server.address, spool=tmp_path / "agent.spool", options=QUICK)
        assert client.pending == 25
        assert client.flush(30, checkpoint=True)
        assert client.sender.sent == 25  # each pending record sent once
        assert client.close(30)
        after = logged_digests(remote, 175)
    assert after == submitted  # each record logged exactly once, in order
    assert read_spool(tmp_path / "agent.spool") == ([], [])


def test_atexit_delivers_what_the_agent_left(tmp_path: Path) -> None:
    with running_server(tmp_path / "data") as (server, remote, _):
        agent = start_agent(tmp_path, server.address, "exit", 30)  # one partial batch
        submitted = list(read_digests(agent, 30))
        assert processes.wait(agent, 60) == 0
        assert agent.stdout is not None
        agent.stdout.close()
        logged = logged_digests(remote, 31)
    assert submitted == logged[:30] and len(logged) == 31  # and the run_closed record
    assert read_spool(tmp_path / "agent.spool") == ([], [])


def test_log_stopped_mid_run_loses_nothing(tmp_path: Path) -> None:
    key_file, data, port = tmp_path / "signer.key", tmp_path / "data", free_port()
    signer = Ed25519Signer.generate(ORIGIN)
    write_signer(key_file, signer)
    # the same gRPC port after the restart; tiles on port 0, not at port + 1 (which another
    # test's port-0 socket may hold)
    listen = ("--listen", f"127.0.0.1:{port}", "--tiles-listen", "127.0.0.1:0")
    server = ServerProcess(data, key_file, *listen)
    client = LedgerClient(server.address, spool=tmp_path / "a.spool", options=QUICK)
    run_file = tmp_path / "run.jsonl"
    try:
        with ledger_run(client, agent="outage", receipts=run_file) as run:
            for n in range(10):
                fetch(n)
            assert client.flush(5)
            server.kill()
            for n in range(10, 30):
                fetch(n)  # the log is down: these wait in the spool
            wait_until(lambda: client.sender.retries > 0, what="the client to retry")
            assert client.pending == 20
            server = ServerProcess(data, key_file, *listen)
        assert client.close(5)
    finally:
        server.terminate()
    report = verify_run(run_file, signer.verifier().key_string())
    assert report["records"] == len(run.entries) == 31


def test_overflow_while_the_log_is_unreachable(tmp_path: Path) -> None:
    port = free_port()
    address = f"127.0.0.1:{port}"
    options = SenderOptions(max_pending=5, overflow="raise", backoff=Backoff(maximum=0.1))
    client = LedgerClient(address, spool=tmp_path / "a.spool", options=options)
    records = [memory_record(n)[0] for n in range(7)]
    for r in records[:5]:
        client.submit(r)
    with pytest.raises(SpoolFullError, match="5 records"):
        client.submit(records[5])
    assert client.pending == 5
    assert not client.close(0.2)
    assert len(read_spool(tmp_path / "a.spool")[1]) == 5  # refused means not written

    blocking = SenderOptions(max_pending=5, block_timeout=0.2, backoff=Backoff(maximum=0.1))
    client = LedgerClient(address, spool=tmp_path / "a.spool", options=blocking)
    start = time.monotonic()
    with pytest.raises(SpoolFullError, match="still full"):
        client.submit(records[5])
    assert time.monotonic() - start >= 0.19
    client.close(0.1)

    patient = SenderOptions(max_pending=5, backoff=Backoff(maximum=0.1))
    client = LedgerClient(address, spool=tmp_path / "a.spool", options=patient)
    # tiles on port 0, not at port + 1 (which another test's port-0 socket may hold)
    tiles = "127.0.0.1:0"
    with running_server(tmp_path / "data", listen=address, tiles_listen=tiles) as (_, remote, _):
        waiter = threading.Thread(target=client.submit, args=(records[5],))
        waiter.start()  # blocks until the log is back and takes the backlog
        waiter.join(10)
        assert not waiter.is_alive()
        client.submit(records[6])
        assert client.flush(5, checkpoint=True) and client.close(5)
        logged = logged_digests(remote)
    assert logged == [record_digest(r) for r in records]


def test_pushback_is_retried_until_everything_is_logged(tmp_path: Path) -> None:
    options = SenderOptions(batch_size=1000, batch_age=0.05, backoff=Backoff(initial=0.01))
    # room for one batch in the queue: any batch that comes while another waits is pushed back
    # (with room for two, a quiet machine drained the six senders without a pushback once)
    with running_server(tmp_path / "data", max_pending=1_000) as (server, remote, _):
        clients = [LedgerClient(server.address, options=options) for _ in range(6)]
        for w, client in enumerate(clients):  # the senders' view: 3 full batches each, at once
            for n in range(3000):
                body = b'{"w":%d,"n":%d}' % (w, n)
                client.sender.put(SpoolItem(hashlib.sha256(body).digest(), body))
        assert all(c.flush(20, checkpoint=True) for c in clients)
        hinted = sum(c.sender.hinted for c in clients)
        assert all(c.close(5) for c in clients)
        logged = logged_digests(remote)
    assert hinted > 0  # RESOURCE_EXHAUSTED happened and was retried after the server's hint
    assert len(logged) == len(set(logged)) == 6 * 3000


# --- the README section ---------------------------------------------------------------------------

README_SDK = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_example_agent_and_its_run_verify(tmp_path: Path) -> None:
    text = README_SDK.read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(code.strip().splitlines()) == 10
    assert 'ledger-verify run run.jsonl --key "$VKEY"' in text
    with running_server(tmp_path / "data") as (server, _, _):
        script = tmp_path / "agent.py"
        script.write_text(code.replace("127.0.0.1:6962", server.address))
        done = processes.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        result = CliRunner().invoke(
            main, ["run", str(tmp_path / "run.jsonl"), "--key", server.app.verifier_key]
        )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("OK: run verified\n")
    assert "(3 records, 3 valid receipts)" in result.output
    lines = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    records = [DecisionRecord.from_json_obj(line["record"]) for line in lines]
    assert [r.kind for r in records] == ["tool_call", "constraint_check", "run_closed"]
    assert [len(r.parent_digests) for r in records] == [0, 1, 1]
    assert "Paris" not in (tmp_path / "run.jsonl").read_text()
    assert read_spool(tmp_path / "agent.spool") == ([], [])
