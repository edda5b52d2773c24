"""A damaged table block cannot fool ``ledger fsck`` (issue 22, item 4): one flipped byte in
the middle of the table file holding a few hundred checkpoints is reported, naming the file and
the lost range, where the scan used to stop at the bad block and say OK."""

from __future__ import annotations

import hashlib
import http.client
import json
import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import DataLossError
from ledger.core.tile_layout import bundle_key
from ledger.fileio.keys import load_signer, write_signer
from ledger.store.rocks import RocksStore, logical_key
from tests import processes
from tests.harness import ORIGIN, running_server

pytestmark = pytest.mark.integration

CHECKPOINTS = 300


def build(data: Path) -> None:
    """A stopped log with CHECKPOINTS checkpoints, compacted into table files."""
    signer = Ed25519Signer.generate(ORIGIN)
    write_signer(data / "signer.key", signer)
    with running_server(data, signer) as (_, log, _):
        for n in range(CHECKPOINTS):
            digest = hashlib.sha256(f"cp-{n}".encode()).digest()
            log.append([digest], wait_for_checkpoint=True)
    store = RocksStore(data / "db")
    store.compact()
    store.close()


def checkpoint_table(data: Path) -> Path:
    """The table file of the default family (it holds the checkpoints and the state)."""
    store = RocksStore(data / "db")
    try:
        files = store._db.live_files()
    finally:
        store.close()
    names = [f["name"] for f in files if bytes(f["end_key"]) == b"V"]
    assert len(names) == 1, files
    return data / "db" / str(names[0]).lstrip("/")


def flip_middle(table: Path) -> None:
    raw = bytearray(table.read_bytes())
    raw[len(raw) // 3] ^= 0x10
    table.write_bytes(bytes(raw))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("fsck-block") / "data"
    build(data)
    return data


def copy(pristine: Path, tmp_path: Path) -> Path:
    """The data dir and its high-water mark (``<data dir>.high-water``, the default)."""
    data = tmp_path / "data"
    shutil.copytree(pristine, data)
    shutil.copy2(f"{pristine}.high-water", f"{data}.high-water")
    return data


def fsck_cli(data: Path) -> tuple[int, dict[str, object], str]:
    cmd = [sys.executable, "-m", "ledger", "fsck", "--data-dir", str(data), "--json"]
    out = processes.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert "Traceback" not in out.stderr, out.stderr
    return out.returncode, json.loads(out.stdout), out.stderr


def test_fsck_names_a_damaged_checkpoint_block(pristine: Path, tmp_path: Path) -> None:
    data = copy(pristine, tmp_path)
    assert fsck_cli(data)[0] == 0
    table = checkpoint_table(data)
    flip_middle(table)
    code, report, _ = fsck_cli(data)
    assert code == 1, report
    problems = report["problems"]
    assert isinstance(problems, list)
    damage = [p for p in problems if table.name in p["where"]]
    assert damage and damage[0]["what"] == "checkpoint", problems
    assert "every checkpoint after checkpoint size" in damage[0]["detail"], damage
    # The scan goes on after the damaged range: the newest checkpoints are still checked.
    counts = report["counts"]
    assert isinstance(counts, dict) and CHECKPOINTS // 2 < counts["checkpoints"] < CHECKPOINTS


def test_the_newest_checkpoint_named_by_the_mark_must_be_stored(
    pristine: Path, tmp_path: Path
) -> None:
    data = copy(pristine, tmp_path)
    store = RocksStore(data / "db")
    newest = store.latest_checkpoint()
    assert newest is not None
    store._db.delete(b"C" + newest.size.to_bytes(8, "big"))  # an attacker cuts the newest
    store.close()
    code, report, _ = fsck_cli(data)
    assert code == 1, report
    assert any(
        p["where"] == f"size {newest.size}" and "mark" in p["detail"]
        for p in report["problems"]  # type: ignore[attr-defined]
    ), report


def test_a_server_answers_data_loss_for_a_damaged_checkpoint(
    pristine: Path, tmp_path: Path
) -> None:
    data = copy(pristine, tmp_path)
    flip_middle(checkpoint_table(data))
    code, report, _ = fsck_cli(data)
    problems = report["problems"]
    assert code == 1 and isinstance(problems, list)
    detail = str(problems[0]["detail"])
    lost = int(detail.split("after checkpoint size ")[1].split()[0]) + 1
    with running_server(data, load_signer(data / "signer.key")) as (_, log, _):
        assert log.checkpoint().size == CHECKPOINTS  # undamaged reads still answer
        with pytest.raises(DataLossError, match="000"):
            log.checkpoint(lost)


def test_anchors_not_checked_are_not_ok(tmp_path: Path) -> None:
    data = tmp_path / "data"
    signer = Ed25519Signer.generate(ORIGIN)
    write_signer(data / "signer.key", signer)
    with running_server(data, signer, embedded_tsa=True) as (_, log, _):
        log.append([hashlib.sha256(b"anchored").digest()], wait_for_checkpoint=True)
        assert log.anchor_now()[1]
    assert fsck_cli(data)[0] == 0
    (data / "tsa" / "root.pem").rename(tmp_path / "root.pem")  # no roots for its TSA now
    code, report, _ = fsck_cli(data)
    assert code == 3 and report["ok"] and report["anchors_not_checked"] == 1, report
    cmd = [sys.executable, "-m", "ledger", "fsck", "--data-dir", str(data)]
    out = processes.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 3 and "WARNING: 1 anchor(s) not checked" in out.stdout, out


def tree_table(data: Path) -> Path:
    """The table file of the tree family (the full entry bundles and tiles, the first bundle
    first)."""
    store = RocksStore(data / "db")
    try:
        files = store._db.live_files()
    finally:
        store.close()
    names = [f["name"] for f in files if logical_key(bytes(f["start_key"])) == bundle_key(0)]
    assert len(names) == 1, files
    return data / "db" / str(names[0]).lstrip("/")


def test_a_damaged_entry_bundle_answers_503_on_the_tiles_port(
    pristine: Path, tmp_path: Path
) -> None:
    data = copy(pristine, tmp_path)
    flip_middle(tree_table(data))
    signer = load_signer(data / "signer.key")
    with running_server(data, signer, tiles_dir=tmp_path / "mirror") as (server, _, _):
        url = server.app.tiles_url
        assert url is not None
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
        try:
            conn.request("GET", "/tile/entries/000")
            answer = conn.getresponse()
            body = answer.read().decode()
        finally:
            conn.close()
    assert answer.status == 503 and "damaged" in body, (answer.status, body)


def test_restore_refuses_a_backup_with_a_damaged_checkpoint_block(
    pristine: Path, tmp_path: Path
) -> None:
    data = copy(pristine, tmp_path)
    backup = tmp_path / "backup"
    made = processes.run([sys.executable, "-m", "ledger", "backup", "--data-dir", str(data),
                          "--out", str(backup)], capture_output=True, text=True, timeout=120,
                         check=False)  # fmt: skip
    assert made.returncode == 0, made.stderr
    table = checkpoint_table(backup)
    flip_middle(table)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy2(data / "signer.key", fresh / "signer.key")
    cmd = [sys.executable, "-m", "ledger", "restore", "from-backup", "--from", str(backup),
           "--data-dir", str(fresh)]  # fmt: skip
    out = processes.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 1 and table.name in out.stderr, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and not (fresh / "db").exists()
