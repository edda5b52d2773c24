"""The one durable-write helper and the one private-file policy (``ledger.fileio``), and the
writers and key readers that use them: every replaced file is fsynced with its folder, every
secret is created 0600, and every kind of private key file is refused when group or others
may access it."""

from __future__ import annotations

import datetime as dt
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ledger.api.auth import TokenStore
from ledger.api.tls import load_server_tls, make_dev_certs
from ledger.core.checkpoint import CosignatureSigner, Ed25519Signer
from ledger.core.errors import KeyFileModeError
from ledger.fileio.durable import remove_temporaries, write_file
from ledger.fileio.keys import load_signer, write_signer
from ledger.fileio.private import read_private, write_private
from ledger.ops.binding import open_bound_signer
from ledger.records.runs import run_closed_record
from ledger.tsa.authority import TsaAuthority
from ledger.witness.server import LogKeys, WitnessSettings, open_witness
from ledger_client.remote.connection import Connection
from ledger_client.sdk.run_file import RunLine, write_run_file
from ledger_client.sdk.spool import FileSpool, SpoolItem

ORIGIN = "ledger.test/fileio"
TIME = "2025-06-01T12:00:00.250Z"
NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, bool]]]:
    """Every fsync the code under test makes, in order: (path, is a folder). The real fsync
    still runs; this only watches."""
    seen: list[tuple[str, bool]] = []
    real = os.fsync

    def watch(fd: int) -> None:
        seen.append((os.readlink(f"/proc/self/fd/{fd}"), stat.S_ISDIR(os.fstat(fd).st_mode)))
        real(fd)

    monkeypatch.setattr(os, "fsync", watch)
    yield seen


def durable_in(seen: list[tuple[str, bool]], folder: Path) -> bool:
    """A file in ``folder`` was fsynced, and then ``folder`` itself."""
    files = [i for i, (p, is_dir) in enumerate(seen) if not is_dir and Path(p).parent == folder]
    dirs = [i for i, (p, is_dir) in enumerate(seen) if is_dir and Path(p) == folder]
    return bool(files) and bool(dirs) and max(dirs) > min(files)


# --- the helper ---------------------------------------------------------------------------------


def test_write_file_replaces_whole_with_the_mode_asked(tmp_path: Path) -> None:
    target = tmp_path / "f"
    write_file(target, "one")
    write_file(target, [b"t", b"wo"], mode=0o644)
    assert target.read_bytes() == b"two" and mode_of(target) == 0o644
    write_file(target, b"three", mode=0o600)
    assert target.read_bytes() == b"three" and mode_of(target) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_write_file_writes_every_chunk_in_order(tmp_path: Path) -> None:
    chunks = [b"a" * 10, b"b" * (2 << 20), b"c" * (600 << 10), b"d" * (600 << 10), b"", b"e"]
    write_file(tmp_path / "f", iter(chunks))
    assert (tmp_path / "f").read_bytes() == b"".join(chunks)


def test_write_file_follows_the_umask_without_a_mode(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        write_file(tmp_path / "f", "x")
    finally:
        os.umask(old)
    assert mode_of(tmp_path / "f") == 0o640


def test_write_file_fsyncs_the_file_then_its_folder(
    tmp_path: Path, fsynced: list[tuple[str, bool]]
) -> None:
    write_file(tmp_path / "f", "x")
    assert durable_in(fsynced, tmp_path)
    fsynced.clear()
    write_file(tmp_path / "g", "x", sync=False)
    assert fsynced == []


def test_write_file_cleans_up_on_any_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f"
    write_file(target, "old")

    def chunks() -> Iterator[bytes]:
        yield b"half"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_file(target, chunks())

    def broken(src: object, dst: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr("ledger.fileio.durable.os.replace", broken)
    with pytest.raises(OSError, match="disk on fire"):
        write_file(target, "new")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_exclusive_never_replaces(tmp_path: Path) -> None:
    target = tmp_path / "f"
    write_file(target, "first", exclusive=True)
    with pytest.raises(FileExistsError):
        write_file(target, "second", exclusive=True)
    assert target.read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_remove_temporaries_takes_only_those_of_the_file(tmp_path: Path) -> None:
    (tmp_path / ".f.1a2b.tmp").write_text("stale")
    (tmp_path / ".g.1a2b.tmp").write_text("someone else's")
    assert remove_temporaries(tmp_path / "f") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".g.1a2b.tmp"]


# --- writers that gained the folder fsync (they renamed, or wrote, without one) -----------------


def _binding(folder: Path) -> None:
    open_bound_signer(folder / "data", folder / "data" / "signer.key", ORIGIN)


def _tokens(folder: Path) -> None:
    TokenStore(folder / "tokens.json").create("a", ["append"], now=1)


def _run_file(folder: Path) -> None:
    record = run_closed_record("run-1", [(0, b"\x01" * 32)], agent="a", time=TIME)
    write_run_file(folder / "run.jsonl", [RunLine(record=record, receipt=None)])


def _signer(folder: Path) -> None:
    write_signer(folder / "k.key", Ed25519Signer.generate(ORIGIN))


def _tsa(folder: Path) -> None:
    TsaAuthority.generate("Test TSA").save(folder)


def _tls(folder: Path) -> None:
    make_dev_certs(folder, hosts=["localhost"], clients=[], now=NOW)


WRITERS: dict[str, tuple[Callable[[Path], None], str]] = {
    "data-dir binding": (_binding, "data"),
    "tokens file": (_tokens, ""),
    "run file": (_run_file, ""),
    "signer key": (_signer, ""),
    "TSA keys": (_tsa, ""),
    "TLS keys": (_tls, ""),
}


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_writers_fsync_the_folder(
    kind: str, tmp_path: Path, fsynced: list[tuple[str, bool]]
) -> None:
    write, folder = WRITERS[kind]
    write(tmp_path)
    assert durable_in(fsynced, (tmp_path / folder).resolve()), fsynced


# --- secrets are created 0600 --------------------------------------------------------------------


def test_an_overwritten_tls_key_becomes_0600(tmp_path: Path) -> None:
    (tmp_path / "server.key").write_text("old")
    (tmp_path / "server.key").chmod(0o644)
    make_dev_certs(tmp_path, hosts=["localhost"], clients=["agent"], now=NOW)
    assert mode_of(tmp_path / "server.key") == 0o600
    assert mode_of(tmp_path / "agent.key") == 0o600
    assert mode_of(tmp_path / "server.pem") == 0o644


def test_a_compacted_spool_and_its_quarantine_stay_0600(tmp_path: Path) -> None:
    path = tmp_path / "s.spool"
    spool = FileSpool(path, compact_bytes=1)
    spool.append(SpoolItem(digest=bytes(32), record_json=b"{}", disclosures_json=b"[]"))
    spool.append(SpoolItem(digest=bytes([1]) * 32, record_json=b"{}", disclosures_json=b"[]"))
    spool.peek(1)
    spool.ack(1)  # compacts: the spool is rewritten through a temporary file
    spool.close()
    assert mode_of(path) == 0o600
    with path.open("ab") as out:
        out.write(b"\x52torn")  # a torn last frame is quarantined on the next open
    FileSpool(path).close()
    assert mode_of(path) == 0o600
    assert mode_of(tmp_path / "s.spool.quarantine") == 0o600


def test_write_private_never_widens(tmp_path: Path) -> None:
    write_private(tmp_path / "s", b"secret")
    assert mode_of(tmp_path / "s") == 0o600


# --- a key file group or others may access is refused, per key kind -----------------------------


def _signer_key(folder: Path) -> tuple[Path, Callable[[], object]]:
    path = folder / "signer.key"
    write_signer(path, Ed25519Signer.generate(ORIGIN))
    return path, lambda: load_signer(path)


def _bound_signer_key(folder: Path) -> tuple[Path, Callable[[], object]]:
    path = folder / "data" / "signer.key"
    open_bound_signer(folder / "data", path, ORIGIN)
    return path, lambda: open_bound_signer(folder / "data", path, ORIGIN)


def _witness_key(folder: Path) -> tuple[Path, Callable[[], object]]:
    path = folder / "witness.key"
    write_signer(path, CosignatureSigner.generate("witness.test"))
    log = Ed25519Signer.generate(ORIGIN).verifier().key_string()
    settings = WitnessSettings(
        key_file=path, state_dir=folder / "state", logs=(LogKeys(origin=ORIGIN, keys=(log,)),)
    )

    def open_it() -> object:
        witness = open_witness(settings)
        witness.close()
        return witness

    return path, open_it


def _tsa_key(folder: Path) -> tuple[Path, Callable[[], object]]:
    TsaAuthority.generate("Test TSA").save(folder)
    return folder / "tsa.key", lambda: TsaAuthority.load(folder)


def _tsa_root_key(folder: Path) -> tuple[Path, Callable[[], object]]:
    TsaAuthority.generate("Test TSA").save(folder)
    return folder / "root.key", lambda: TsaAuthority.load(folder)


def _tls_server_key(folder: Path) -> tuple[Path, Callable[[], object]]:
    certs = make_dev_certs(folder, hosts=["localhost"], clients=[], now=NOW)
    return certs.server_key, lambda: load_server_tls(certs.server_cert, certs.server_key, None)


def _tls_client_key(folder: Path) -> tuple[Path, Callable[[], object]]:
    certs = make_dev_certs(folder, hosts=["localhost"], clients=["agent"], now=NOW)
    cert, key = certs.clients[0]
    connection = Connection.resolve(tls_ca=certs.ca, tls_cert=cert, tls_key=key, environ={})
    return key, connection.read_tls


def _tokens_file(folder: Path) -> tuple[Path, Callable[[], object]]:
    path = folder / "tokens.json"
    TokenStore(path).create("a", ["append"], now=1)
    return path, lambda: TokenStore(path)


KEY_KINDS: dict[str, Callable[[Path], tuple[Path, Callable[[], object]]]] = {
    "log signer key": _signer_key,
    "log signer key (serve)": _bound_signer_key,
    "witness key": _witness_key,
    "TSA signing key": _tsa_key,
    "TSA root key": _tsa_root_key,
    "TLS server key": _tls_server_key,
    "TLS client key": _tls_client_key,
    "tokens file": _tokens_file,
}


@pytest.mark.parametrize("kind", sorted(KEY_KINDS))
def test_key_file_mode_policy(kind: str, tmp_path: Path) -> None:
    """Created 0600; 0640 and 0604 refused with one line naming the file and the fix; 0600
    (and 0400) accepted."""
    path, read = KEY_KINDS[kind](tmp_path)
    assert mode_of(path) == 0o600
    read()
    for mode in (0o640, 0o604, 0o620):
        path.chmod(mode)
        with pytest.raises(KeyFileModeError) as refused:
            read()
        message = str(refused.value)
        assert "\n" not in message and f"mode {mode:04o}" in message
        assert message.endswith(f"run `chmod 600 {path}`")
    for mode in (0o600, 0o400):
        path.chmod(mode)
        read()


def test_read_private_names_an_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cannot read TLS key .*nope"):
        read_private(tmp_path / "nope", "TLS key")


def test_the_clis_refuse_an_open_key_with_exit_2_and_one_line(tmp_path: Path) -> None:
    """``ledger witness serve``, ``ledger verifier-key``, ``ledger tsa`` (exit 1 or a traceback
    before: the witness and TSA keys were not checked)."""
    from click.testing import CliRunner

    from ledger.cli.main import main

    witness_key = tmp_path / "w.key"
    write_signer(witness_key, CosignatureSigner.generate("w.test"))
    log_key = tmp_path / "log.key"
    write_signer(log_key, Ed25519Signer.generate(ORIGIN))
    TsaAuthority.generate("Test TSA").save(tmp_path / "tsa")
    for path in (witness_key, log_key, tmp_path / "tsa" / "tsa.key"):
        path.chmod(0o644)
    vkey = Ed25519Signer.generate(ORIGIN).verifier().key_string()
    runs = {
        witness_key: ["witness", "serve", "--key", str(witness_key), "--log", vkey,
                      "--state-dir", str(tmp_path / "s"), "--listen", "127.0.0.1:0"],
        log_key: ["verifier-key", "--key", str(log_key)],
        tmp_path / "tsa" / "tsa.key": ["tsa", "--listen", "127.0.0.1:0",
                                       "--state-dir", str(tmp_path / "tsa")],
    }  # fmt: skip
    for path, argv in runs.items():
        result = CliRunner().invoke(main, argv)
        assert result.exit_code == 2, (argv, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].endswith(f"run `chmod 600 {path}`"), result.output
