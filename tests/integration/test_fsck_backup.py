"""``ledger fsck`` finds a single flipped byte anywhere in a log's data and names it; backups
are consistent while serving; ``ledger restore`` refuses a rollback unless forced."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import sys
from pathlib import Path

import pytest

from ledger.app.tsa_setup import EMBEDDED_TSA_NAME, load_pems
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import InconsistencyError, InvalidArgumentError
from ledger.fileio.keys import write_signer
from ledger.ops.fsck import fsck
from ledger.ops.restore import restore
from ledger.store.rocks import RocksStore, logical_key
from ledger_client.remote.connection import Connection
from ledger_client.remote.log import RemoteLog
from tests import processes
from tests.harness import ORIGIN, running_server

pytestmark = pytest.mark.integration


def digests(n: int, tag: str) -> list[bytes]:
    return [hashlib.sha256(f"{tag}-{i}".encode()).digest() for i in range(n)]


def make_log(data: Path, sizes: tuple[int, ...] = (37, 20)) -> Ed25519Signer:
    """A stopped log with several checkpoints, an anchor (embedded TSA) and metadata."""
    signer = Ed25519Signer.generate(ORIGIN)
    write_signer(data / "signer.key", signer)
    with running_server(data, signer, embedded_tsa=True) as (_, log, _):
        for n, size in enumerate(sizes):
            log.append(digests(size, f"b{n}"), metadata=[b"m"] * size, wait_for_checkpoint=True)
        size, anchors, _ = log.anchor_now()
        assert anchors
    store = RocksStore(data / "db")
    store.compact()  # everything in table files, as after a long run
    store.close()
    return signer


def roots(data: Path) -> dict[str, list[object]]:
    return {EMBEDDED_TSA_NAME: load_pems((data / "tsa" / "root.pem",), "root")}  # type: ignore[dict-item]


def test_a_clean_log_passes(tmp_path: Path) -> None:
    make_log(tmp_path / "data")
    report = fsck(tmp_path / "data", tsa_roots=roots(tmp_path / "data"))  # type: ignore[arg-type]
    assert report.ok, report.problems
    assert report.counts["entries"] == 57 and report.counts["anchors"] == 1
    assert report.counts["checkpoints"] >= 2 and report.counts["tree_values"] > 0


def flip_value(data: Path, family: str, key_prefix: bytes, n: int = 0) -> bytes:
    """Flip a byte of the ``n``-th value whose key starts with ``key_prefix`` (in the tree
    family: whose logical key does, ``ledger.store.rocks.logical_key``)."""
    store = RocksStore(data / "db")
    try:
        items = [
            (key, value)
            for key, value in store.scan_family(family)
            if (logical_key(key) or b"" if family == "tree" else key).startswith(key_prefix)
        ]
        key, value = items[n]
        at = len(value) // 2
        changed = value[:at] + bytes([value[at] ^ 0x01]) + value[at + 1 :]
        store._family(family).put(key, changed)
    finally:
        store.close()
    return key


@pytest.mark.parametrize(
    ("family", "prefix", "n", "what"),
    [
        # a full bundle's bytes: a length that no longer parses, or a leaf whose tile rows
        # above it no longer match
        ("tree", b"B", 0, "bundle tile"),
        ("tree", b"T", 0, "tile"),  # a stored hash of a full tile
        ("default", b"PB", 0, "bundle tile"),  # the right-edge bundle
        ("default", b"PT", 0, "tile"),  # the right-edge tile
        ("default", b"C", 1, "checkpoint"),
        ("default", b"A", 0, "anchor"),
        ("default", b"S", 0, "state"),
    ],
)
def test_a_flipped_value_byte_is_named(
    tmp_path: Path, family: str, prefix: bytes, n: int, what: str
) -> None:
    data = tmp_path / "data"
    make_log(data, sizes=(300, 20))  # a full bundle and level-0 tile, and the right edge
    flip_value(data, family, prefix, n)
    report = fsck(data, tsa_roots=roots(data))  # type: ignore[arg-type]
    assert not report.ok
    assert set(what.split()) & {p.what for p in report.problems}, report.problems


def test_a_flipped_dedup_slot_is_named(tmp_path: Path) -> None:
    """The dedup table is derived, but a slot damaged after it was written would hide a
    duplicate: fsck looks every entry's digest up and names the one it no longer finds."""
    data = tmp_path / "data"
    make_log(data)
    table = data / "db" / "LEDGER-DEDUP"
    raw = bytearray(table.read_bytes())
    slots = raw[8192:]
    eight = (8).to_bytes(6, "little")  # entry 7's index + 1
    (at,) = [k for k in range(0, len(slots), 12) if slots[k + 6 : k + 12] == eight]
    raw[8192 + at] ^= 0x01  # entry 7's fingerprint
    table.write_bytes(bytes(raw))
    report = fsck(data, tsa_roots=roots(data))  # type: ignore[arg-type]
    assert [(p.what, p.where) for p in report.problems] == [("dedup", "index 7")], report.problems


def same_answers(a: Path, b: Path) -> bool:
    """Both databases answer every scan and every point read the same."""
    stores = [RocksStore(a), RocksStore(b)]
    try:
        for family in RocksStore.FAMILIES:
            items = [list(s.scan_family(family)) for s in stores]
            if items[0] != items[1]:
                return False
            keys = [k for k, _ in items[0]]
            if any(s.unreadable_keys(family, keys) for s in stores):
                return False
        return True
    finally:
        for s in stores:
            s.close()


def test_flipped_bytes_in_table_files_and_the_binding(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_log(data)
    pristine = tmp_path / "pristine"
    shutil.copytree(data, pristine)
    tables = sorted((data / "db").glob("*.sst"))
    assert tables
    rng = random.Random(15)
    unseen = 0
    for trial in range(12):
        shutil.rmtree(data)
        shutil.copytree(pristine, data)
        target = rng.choice(tables)
        raw = bytearray(target.read_bytes())
        at = rng.randrange(len(raw))
        raw[at] ^= 1 << rng.randrange(8)
        target.write_bytes(bytes(raw))
        report = fsck(data, tsa_roots=roots(data))  # type: ignore[arg-type]
        if report.ok:
            # Only a flip that changes no answer may pass (a 0 -> 1 bit in a bloom filter:
            # one more false positive); every key and value must read back as before.
            assert same_answers(pristine / "db", data / "db"), f"trial {trial}: {target.name}"
            unseen += 1
    assert unseen <= 3, f"{unseen} of 12 random flips were not reported"
    shutil.rmtree(data)
    shutil.copytree(pristine, data)
    binding = json.loads((data / "log.json").read_text())
    binding["origin"] = "other.example/log"
    (data / "log.json").write_text(json.dumps(binding))
    report = fsck(data, tsa_roots=roots(data))  # type: ignore[arg-type]
    assert any(p.what == "checkpoint" and "origin" in p.detail for p in report.problems)


def test_fsck_cli_exit_codes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_log(data, sizes=(5,))
    ok = processes.run([sys.executable, "-m", "ledger", "fsck", "--data-dir", str(data)],
                        capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert ok.returncode == 0 and ": OK;" in ok.stdout, ok.stderr
    key = flip_value(data, "default", b"PB", 0)
    cmd = [sys.executable, "-m", "ledger", "fsck", "--data-dir", str(data), "--json"]
    bad = processes.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 1
    problems = json.loads(bad.stdout)["problems"]
    assert problems and "Traceback" not in bad.stderr, key


def test_backup_while_serving_and_restore_refuses_a_rollback(tmp_path: Path) -> None:
    data = tmp_path / "data"
    signer = Ed25519Signer.generate(ORIGIN)
    write_signer(data / "signer.key", signer)
    store_admin = data / "tokens.json"
    from ledger.api.auth import TokenStore

    admin, _ = TokenStore(store_admin).create("ops", ["admin"], now=1)
    with running_server(data, signer) as (server, _, _):
        log = RemoteLog(Connection(address=server.address, token=admin))
        log.append(digests(10, "a"), wait_for_checkpoint=True)
        where, size, cp = log.backup(str(tmp_path / "early"))
        assert (size, cp) == (10, 10) and Path(where) == tmp_path / "early"
        log.append(digests(5, "b"), wait_for_checkpoint=True)
        with pytest.raises(InvalidArgumentError, match="exists"):
            log.backup(str(tmp_path / "early"))
        log.close()
    assert fsck(tmp_path / "early", key_file=data / "signer.key").ok
    # The log has published size 15: restoring the size-10 backup is a rollback.
    with pytest.raises(InconsistencyError, match="rollback"):
        restore(tmp_path / "early", data)
    late = processes.run([sys.executable, "-m", "ledger", "backup", "--data-dir", str(data),
                           "--out", str(tmp_path / "late")], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert late.returncode == 0, late.stderr
    assert json.loads(late.stdout)["checkpoint_size"] == 15
    done = restore(tmp_path / "late", data)
    assert done.report.ok and done.replaced is not None and done.replaced.exists()
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy2(data / "signer.key", fresh / "signer.key")
    # A new data dir knows nothing: a published checkpoint (from a monitor) is the evidence.
    opened = RocksStore(data / "db")
    note = opened.latest_checkpoint()
    opened.close()
    assert note is not None
    (tmp_path / "published.txt").write_text(note.note)
    cli = processes.run([sys.executable, "-m", "ledger", "restore", "from-backup", "--from",
                          str(tmp_path / "early"), "--data-dir", str(fresh),
                          "--published-checkpoint", str(tmp_path / "published.txt")],
                         capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert cli.returncode == 1 and "rollback" in cli.stderr and "Traceback" not in cli.stderr
    forced = restore(tmp_path / "early", fresh, published_notes=[note.note], force=True)
    assert forced.checkpoint_size == 10 and forced.newest_published == 15
    with running_server(fresh, signer) as (_, log, _):
        assert log.checkpoint().size == 10
