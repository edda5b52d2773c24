"""Access that stays closed (issue 22 item 5), tried the way an attacker would: real
``ledger serve`` processes, real sockets, the real ``ledger`` commands.

Once a log has had a credential, its data dir's binding records it as closed: revoking the last
token, deleting the tokens file, restarting or restoring a backup elsewhere never lets an
anonymous caller append or take a Backup again; only ``ledger access open --reason`` does, and
that is logged and recorded. Backups carry the token hashes, the TSA roots and the witness
settings (never a private key or a token); tokens expire; failed authentications are throttled
per client address before any token is looked at.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from ledger.api.auth import TokenStore
from ledger.core.errors import (
    FailedPreconditionError,
    LedgerError,
    PushbackError,
    UnauthenticatedError,
)
from ledger.fileio.keys import write_signer
from ledger.ops.backup import BackupTrust, WitnessSetting, backup_data_dir, read_witnesses
from ledger_client.remote.connection import Connection
from ledger_client.remote.log import RemoteLog
from tests import processes
from tests.harness import ORIGIN, ServerProcess, running_server
from tests.waits import wait_until

pytestmark = pytest.mark.integration


def digest(i: int) -> bytes:
    return hashlib.sha256(f"access-{i}".encode()).digest()


def ledger(*args: str | Path, check: bool = True) -> tuple[int, str, str]:
    """Run ``ledger ARGS``; (exit code, stdout, stderr)."""
    done = processes.run(
        [sys.executable, "-m", "ledger", *(str(a) for a in args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done.returncode, done.stdout, done.stderr


# Waiting for the server to accept a token polls every 0.25 s: each refused try counts against
# the address's failed-authentication throttle (20 a minute), which a 20 ms poll would trip
# before the server has re-read the tokens file (within a second).


def error_of(call: Callable[[], object]) -> LedgerError | None:
    """The error ``call`` raised (None: it succeeded)."""
    try:
        call()
    except LedgerError as exc:
        return exc
    return None


def client(address: str, token: str | None = None) -> RemoteLog:
    return RemoteLog(Connection(address=address, token=token), timeout=30)


def new_token(data: Path, name: str, *scopes: str, extra: tuple[str, ...] = ()) -> str:
    scope_args = [a for s in scopes for a in ("--scope", s)]
    _, out, _ = ledger("token", "create", "--data-dir", data, "--name", name, *scope_args, *extra)
    return out.strip()


def make_log(tmp_path: Path) -> tuple[Path, Path]:
    data, key = tmp_path / "data", tmp_path / "signer.key"
    from ledger.core.checkpoint import Ed25519Signer

    write_signer(key, Ed25519Signer.generate(ORIGIN))
    return data, key


def test_revoking_the_last_token_or_deleting_the_file_keeps_the_log_closed(
    tmp_path: Path,
) -> None:
    data, key = make_log(tmp_path)
    server = ServerProcess(data, key)
    try:
        with client(server.address) as anonymous:
            anonymous.append([digest(0)])  # the open development log, before any token
            token = new_token(data, "writer", "append")
            with client(server.address, token) as writer:
                wait_until(
                    lambda: isinstance(error_of(lambda: anonymous.append([digest(1)])),
                                       UnauthenticatedError),
                    timeout=10, what="the first token to close the log",
                )  # fmt: skip
                writer.append([digest(2)])
                ledger("token", "revoke", "--data-dir", data, "writer")
                wait_until(
                    lambda: isinstance(error_of(writer.checkpoint), UnauthenticatedError),
                    timeout=10, what="the revocation",
                )  # fmt: skip
            # the server has re-read the tokens file (the revoked token is refused): still closed
            refused = error_of(lambda: anonymous.append([digest(3)]))
            assert isinstance(refused, UnauthenticatedError), refused
            assert "closed" in str(refused) and "ledger access open" in str(refused)
            assert "ledger token create" in str(refused)
            backup = error_of(lambda: anonymous.backup(str(tmp_path / "stolen")))
            assert isinstance(backup, UnauthenticatedError), backup
            assert not (tmp_path / "stolen").exists()

            second = new_token(data, "second", "append")
            with client(server.address, second) as writer:
                wait_until(lambda: error_of(lambda: writer.append([digest(4)])) is None,
                           timeout=10, interval=0.25, what="the second token")  # fmt: skip
                (data / "tokens.json").unlink()
                wait_until(
                    lambda: isinstance(error_of(writer.checkpoint), UnauthenticatedError),
                    timeout=10, what="the server to see the deleted tokens file",
                )  # fmt: skip
            refused = error_of(lambda: anonymous.append([digest(5)]))
            assert isinstance(refused, UnauthenticatedError), refused
            backup = error_of(lambda: anonymous.backup(str(tmp_path / "stolen")))
            assert isinstance(backup, UnauthenticatedError), backup
    finally:
        server.terminate()
    again = ServerProcess(data, key)  # a restart without any tokens file
    try:
        assert "closed" in again.ready["auth"], again.ready
        with client(again.address) as anonymous:
            refused = error_of(lambda: anonymous.append([digest(6)]))
            assert isinstance(refused, UnauthenticatedError), refused
            assert anonymous.checkpoint().size >= 3  # reads stay open
    finally:
        again.terminate()
    assert not (tmp_path / "stolen").exists()


def test_reopening_is_an_explicit_logged_recorded_command(tmp_path: Path) -> None:
    data, key = make_log(tmp_path)
    server = ServerProcess(data, key)
    try:
        new_token(data, "writer", "append")
        code, _, err = ledger(
            "access", "open", "--data-dir", data, "--reason", "too early", check=False
        )
        assert code == 1 and "revoke them first" in err  # a log with tokens stays closed
        ledger("token", "revoke", "--data-dir", data, "writer")
        with client(server.address) as anonymous:
            wait_until(
                lambda: isinstance(error_of(lambda: anonymous.append([digest(10)])),
                                   UnauthenticatedError),
                timeout=10, what="the closed log to refuse",
            )  # fmt: skip
            code, _, err = ledger("access", "open", "--data-dir", data, check=False)
            assert code == 2 and "--reason" in err  # a reason is required
            _, _, err = ledger(
                "access", "open", "--data-dir", data, "--reason", "back to development use"
            )
            assert "access open" in err and "back to development use" in err
            wait_until(lambda: error_of(lambda: anonymous.append([digest(11)])) is None,
                       timeout=10, interval=0.25, what="the reopened log")  # fmt: skip
            _, out, _ = ledger("access", "status", "--data-dir", data)
            status = json.loads(out)
            assert status["access"] == "open"
            events = [(e["state"], e["by"]) for e in status["events"]]
            assert events == [
                ("closed", "ledger token create"),
                ("open", "ledger access open"),
            ], events
            assert status["events"][-1]["reason"] == "back to development use"
            ledger("access", "close", "--data-dir", data, "--reason", "going to production")
            wait_until(
                lambda: isinstance(error_of(lambda: anonymous.append([digest(12)])),
                                   UnauthenticatedError),
                timeout=10, what="the log to close again",
            )  # fmt: skip
    finally:
        server.terminate()
    log = server.log_path.read_text()
    assert "access reopened to anonymous callers" in log and "back to development use" in log


def test_an_expired_token_is_refused_and_listed_as_expired(tmp_path: Path) -> None:
    data, key = make_log(tmp_path)
    server = ServerProcess(data, key)
    try:
        # 10 s: the listing below must run before it expires, and two CLI starts took over 3 s
        # on a loaded machine (load 9, three workers)
        token = new_token(data, "brief", "append", extra=("--expires", "10s"))
        _, listed, _ = ledger("token", "list", "--data-dir", data)
        assert "brief" in listed and "\texpires 20" in listed, listed
        with client(server.address, token) as writer:
            wait_until(lambda: error_of(lambda: writer.append([digest(20)])) is None,
                       timeout=10, interval=0.25, what="the new token")  # fmt: skip
            expired = wait_until(
                lambda: isinstance(e := error_of(lambda: writer.append([digest(21)])),
                                   UnauthenticatedError) and e,
                timeout=30, interval=0.25, what="the token to expire",
            )  # fmt: skip
            assert "token expired" in str(expired)
        _, listed, _ = ledger("token", "list", "--data-dir", data)
        assert "\texpired 20" in listed, listed
        with client(server.address) as anonymous:  # an expired token leaves the log closed
            refused = error_of(lambda: anonymous.append([digest(22)]))
            assert isinstance(refused, UnauthenticatedError) and "closed" in str(refused)
    finally:
        server.terminate()


def test_guessing_tokens_is_throttled_per_address_before_identification(tmp_path: Path) -> None:
    data, key = make_log(tmp_path)
    data.mkdir(mode=0o700)
    token = TokenStore(data / "tokens.json").create("writer", ["append"], now=1)[0]
    # localhost: the same port on 127.0.0.1 and ::1, two client addresses on one machine
    server = ServerProcess(data, key, "--listen", "localhost:0")
    try:
        port = server.address.rsplit(":", 1)[1]
        outcomes: dict[str, int] = {}
        with client(f"127.0.0.1:{port}", "dl_00000000_" + "x" * 43) as guesser:
            start = time.monotonic()
            for i in range(400):
                name = type(error_of(partial(guesser.append, [digest(100 + i)]))).__name__
                outcomes[name] = outcomes.get(name, 0) + 1
            elapsed = time.monotonic() - start
            refused = error_of(lambda: guesser.append([digest(1)]))
        assert outcomes.get("NoneType", 0) == 0, outcomes
        assert outcomes.get("UnauthenticatedError", 0) <= 20, outcomes
        assert outcomes.get("PushbackError", 0) >= 380, outcomes
        assert isinstance(refused, PushbackError) and refused.retry_after > 0
        assert "failed authentications" in str(refused)
        with client(f"127.0.0.1:{port}", token) as same_address:
            assert isinstance(error_of(lambda: same_address.append([digest(2)])), PushbackError)
        with client(f"[::1]:{port}", token) as other_address:
            other_address.append([digest(3)])
    finally:
        server.terminate()
    print(f"400 wrong tokens in {elapsed:.2f} s: {outcomes}")


def test_a_backup_restored_elsewhere_stays_closed_and_keeps_its_trust(tmp_path: Path) -> None:
    data, key = make_log(tmp_path)
    server = ServerProcess(data, key, "--embedded-tsa")
    out = tmp_path / "backup"
    try:
        admin = new_token(data, "admin", "admin")
        writer = new_token(data, "writer", "append")
        with client(server.address, writer) as w:
            wait_until(lambda: error_of(lambda: w.append([digest(30)])) is None,
                       timeout=10, interval=0.25, what="the writer's token")  # fmt: skip
            for i in range(31, 40):
                w.append([digest(i)], wait_for_checkpoint=True)
        with client(server.address, admin) as a:
            size, anchors, failures = a.anchor_now()
            assert size >= 10 and anchors, failures
            a.backup(str(out))
    finally:
        server.terminate()

    # elsewhere: the signer key (kept apart from the data) and the backup; no mark, no TSA
    there = tmp_path / "elsewhere"
    there.mkdir()
    there_data, there_key = there / "data", there / "signer.key"
    shutil.copy2(key, there_key)
    _, done, _ = ledger("restore", "from-backup", "--data-dir", there_data, "--from", out)
    server = ServerProcess(there_data, there_key)
    try:
        assert "closed" not in server.ready["auth"]  # tokens came back with the backup
        with client(server.address) as anonymous:
            stolen = error_of(lambda: anonymous.backup(str(tmp_path / "stolen")))
            assert isinstance(stolen, UnauthenticatedError), stolen
            refused = error_of(lambda: anonymous.append([digest(50)]))
            assert isinstance(refused, UnauthenticatedError), refused
        with client(server.address, writer) as w:
            # the original token works, and the log, restored with no published mark
            # beside it, is read-only until witnesses or `ledger restore accept` say otherwise
            held = error_of(lambda: w.append([digest(51)]))
            assert isinstance(held, FailedPreconditionError), held
            assert "no high-water mark" in str(held) and "restore accept" in str(held)
        with client(server.address, admin) as a:
            _, size, _ = a.backup(str(tmp_path / "second"))
            assert size >= 10
    finally:
        server.terminate()
    assert not (tmp_path / "stolen").exists()

    restored = json.loads(done)
    assert restored["access"] == "closed" and restored["tokens_restored"], restored
    assert restored["trust_restored"], restored
    files = {p.relative_to(out).as_posix(): p for p in out.rglob("*") if p.is_file()}
    assert "tokens.json" in files and "trust/trust.json" in files and "log.json" in files
    everything = b"".join(p.read_bytes() for p in files.values())
    assert b"PRIVATE KEY" not in everything
    tsa_state = [p for p in (data / "tsa").iterdir() if p.is_file() and p.name != "root.pem"]
    assert tsa_state  # the embedded TSA's key and state stay home
    for private in (key, *tsa_state):
        assert private.read_bytes() not in everything, private
    for secret in (admin, writer):
        secret_part = secret.split("_", 2)[2]  # dl_<id>_<secret>; the secret may hold "_"
        assert secret.encode() not in everything and secret_part.encode() not in everything
    hashes = json.loads(files["tokens.json"].read_text())["tokens"]
    assert {t["name"] for t in hashes} == {"admin", "writer"} and all(t["sha256"] for t in hashes)
    trust = json.loads(files["trust/trust.json"].read_text())
    assert [t["name"] for t in trust["tsas"]] == ["embedded-dev"] and trust["tsas"][0]["roots"]
    assert json.loads(files["log.json"].read_text())["access"] == "closed"

    code, report, err = ledger(
        "fsck", "--data-dir", there_data, "--key", there_key, "--json", check=False
    )
    checked = json.loads(report)
    assert code == 0 and checked["ok"] and checked["anchors_not_checked"] == 0, (report, err)
    assert checked["counts"].get("anchors", 0) >= 1, checked


def test_a_backup_records_the_witness_settings_and_redacted_tsa_urls(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data, embedded_tsa=True) as (_, log, signer):
        log.append([digest(60)], wait_for_checkpoint=True)
    witness = WitnessSetting(name="w-1", url="https://user:pw@w.example/", key="w-1+00+AA",
                             timeout_s=2.0)  # fmt: skip
    trust = BackupTrust(
        tokens_file=data / "tokens.json",
        tsa_roots={"paid-tsa": [data / "tsa" / "root.pem"]},
        tsa_urls={"paid-tsa": "https://tsa.example/tsr?apikey=SECRET"},
        witnesses=[witness],
        witness_quorum=1,
    )
    out = tmp_path / "backup"
    backup_data_dir(data, out, trust)
    recorded = (out / "trust" / "trust.json").read_text()
    assert "SECRET" not in recorded and "pw@" not in recorded, recorded
    assert read_witnesses(out / "trust") == [
        WitnessSetting(name="w-1", url="https://w.example/", key="w-1+00+AA", timeout_s=2.0)
    ]
    there, key = tmp_path / "elsewhere" / "data", tmp_path / "elsewhere" / "signer.key"
    there.parent.mkdir()
    write_signer(key, signer)
    _, done, _ = ledger("restore", "from-backup", "--data-dir", there, "--from", out)
    assert json.loads(done)["witnesses_recorded"] == ["w-1"]
    server = ServerProcess(there, key)
    server.terminate()
    assert "names witnesses the configuration lacks (w-1)" in server.log_path.read_text()
