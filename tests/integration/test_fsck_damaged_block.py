"""A damaged table block cannot fool ``ledger fsck`` (issue 22, item 4): one flipped byte in
the middle of the table file holding a few hundred checkpoints is reported, naming the file and
the lost range, where the scan used to stop at the bad block and say OK."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.fileio.keys import write_signer
from ledger.store.rocks import RocksStore
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


def test_fsck_names_a_damaged_checkpoint_block(pristine: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(pristine, data)
    table = checkpoint_table(data)
    flip_middle(table)
    cmd = [sys.executable, "-m", "ledger", "fsck", "--data-dir", str(data), "--json"]
    out = processes.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr
    problems = json.loads(out.stdout)["problems"]
    text = json.dumps(problems)
    assert table.name in text, problems
    assert any(p["what"] == "checkpoint" and "size" in p["where"] for p in problems), problems
