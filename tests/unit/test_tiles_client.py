"""The tile client (``ledger_client.remote.tiles``) over a mirror folder read in place (``file://``):
fallbacks, a bounded cache, and what it does with tiles that were tampered with."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.core import merkle, tiles
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import (
    BoundsError,
    FormatError,
    MalformedTileError,
    NotFoundError,
    RootMismatchError,
    ServiceError,
    VerificationError,
)
from ledger.core.types import PublishedCheckpoint, decode_leaf
from ledger.http.mirror import TileMirror
from ledger.log.facade import Log
from ledger.log.sequencer import AppendItem
from ledger.store.contract import MemoryStore
from ledger.store.tile_reader import TileReader
from ledger_client.cli.main import main as verify_main
from ledger_client.receipts.receipt import Receipt
from ledger_client.remote.tiles import TileClient, http_fetch
from tests import processes
from tests.offline import OFFLINE_PROBE

ORIGIN = "ledger.test/tile-client"


class _Mirrored:
    def __init__(self, folder: Path) -> None:
        self.signer = Ed25519Signer.generate(ORIGIN)
        self.store = MemoryStore()
        self.log = Log(store=self.store, signer=self.signer, origin=ORIGIN)
        reader = TileReader(store=self.store, published=self.log.latest_checkpoint)
        self.mirror = TileMirror(directory=folder, reader=reader, origin=ORIGIN)
        self.folder = folder

    def grow(self, count: int) -> PublishedCheckpoint:
        self.log.append([AppendItem(os.urandom(32)) for _ in range(count)])
        checkpoint = self.log.publish()
        self.mirror.update([checkpoint])
        return checkpoint


@pytest.fixture
def mirrored(tmp_path: Path) -> _Mirrored:
    return _Mirrored(tmp_path / "mirror")


def test_proofs_and_leaves_from_a_mirror(mirrored: _Mirrored) -> None:
    first = mirrored.grow(300)
    second = mirrored.grow(70)
    client = TileClient(mirrored.folder.as_uri())
    verified = client.checkpoint([mirrored.signer.verifier()], origin=ORIGIN).checkpoint
    assert verified.size == second.size == 370
    leaves = client.leaves(0, 370, 370)
    assert leaves == mirrored.store.get_leaves(range(370))
    for index in (0, 255, 256, 299):
        client.verify_inclusion(leaves[index], index, first.size, first.root_hash)
        client.verify_inclusion(leaves[index], index, 370, second.root_hash)
    client.verify_consistency(first.size, first.root_hash, 370, second.root_hash)
    assert client.consistency_proof(0, 370) == [] and client.consistency_proof(5, 5) == []
    with pytest.raises(BoundsError):
        client.consistency_proof(6, 5)
    with pytest.raises(BoundsError):
        client.leaves(360, 20, 370)


def test_a_missing_partial_tile_falls_back_to_the_full_one(mirrored: _Mirrored) -> None:
    mirrored.grow(100)  # tile/0/000.p/100 and tile/entries/000.p/100
    latest = mirrored.grow(200)  # tile/0/000 is full now
    (mirrored.folder / "tile/0/000.p/100").unlink()
    (mirrored.folder / "tile/entries/000.p/100").unlink()
    client = TileClient(mirrored.folder.as_uri())
    assert client.root(100) == mirrored.log.checkpoint(100).root_hash
    assert client.leaves(0, 100, 100) == mirrored.store.get_leaves(range(100))
    assert client.root(latest.size) == latest.root_hash


def test_the_cache_is_bounded(mirrored: _Mirrored) -> None:
    latest = mirrored.grow(256 * 6)
    client = TileClient(mirrored.folder.as_uri(), cache_tiles=2)
    for index in range(0, latest.size, 100):
        client.inclusion_proof(index, latest.size)
    assert len(client._hashes) <= 2


def test_tampered_tiles_are_caught(mirrored: _Mirrored, tmp_path: Path) -> None:
    latest = mirrored.grow(600)
    leaf = mirrored.store.get_leaves([10])[0]
    bad = tmp_path / "bad"
    shutil.copytree(mirrored.folder, bad)
    tile = bad / "tile/0/000"
    data = bytearray(tile.read_bytes())
    data[32 * 11] ^= 1  # the hash of leaf 11: a sibling on leaf 10's path
    tile.write_bytes(bytes(data))
    with pytest.raises(RootMismatchError):
        TileClient(bad.as_uri()).verify_inclusion(leaf, 10, latest.size, latest.root_hash)
    tile.write_bytes(bytes(data[:-5]))
    with pytest.raises(MalformedTileError):
        TileClient(bad.as_uri()).inclusion_proof(10, latest.size)
    (bad / "tile/entries/001").write_bytes(b"\x00\x05abc")
    with pytest.raises(MalformedTileError):
        TileClient(bad.as_uri()).leaves(300, 1, latest.size)
    (bad / "tile/0/001").unlink()
    with pytest.raises(NotFoundError):
        TileClient(bad.as_uri()).inclusion_proof(300, latest.size)


def test_unreachable_url_is_a_service_error() -> None:
    with pytest.raises(ServiceError):
        http_fetch(timeout=2)("http://127.0.0.1:1/checkpoint")
    with pytest.raises(ServiceError):
        TileClient("notascheme://x").checkpoint_note()


def test_monitor_full_audit_over_tiles_catches_a_rewritten_entry(
    mirrored: _Mirrored, tmp_path: Path
) -> None:
    mirrored.grow(700)
    key = mirrored.signer.verifier().key_string()
    state = tmp_path / "state.json"
    args = ["monitor", "--tiles", mirrored.folder.as_uri(), "--key", key, "--state", str(state)]
    ok = CliRunner().invoke(verify_main, [*args, "--once", "--full-audit"])
    assert ok.exit_code == 0, ok.output
    mirrored.grow(300)
    bundle = mirrored.folder / "tile/entries/002"
    entries = tiles.decode_entry_bundle(bundle.read_bytes(), 256)
    entries[200] = entries[200][:-1] + bytes([entries[200][-1] ^ 1])  # entry 712, rewritten
    bundle.write_bytes(tiles.encode_entry_bundle(entries))
    audit = CliRunner().invoke(verify_main, [*args, "--once", "--full-audit"])
    assert audit.exit_code == 1, audit.output
    assert "audit" in audit.output


def test_proof_hashes_are_what_the_log_serves(mirrored: _Mirrored) -> None:
    for count in (1, 512, 264):  # published sizes 1, 513, 777: their partial tiles are kept
        mirrored.grow(count)
    latest = mirrored.grow(223)
    client = TileClient(mirrored.folder.as_uri())
    for index, size in ((0, 1), (5, 513), (999, 1000), (400, 777)):
        assert client.inclusion_proof(index, size) == list(
            mirrored.log.inclusion_proof(index, size).hashes
        )
    assert client.consistency_proof(300, latest.size) == list(
        mirrored.log.consistency_proof(300, latest.size).hashes
    )
    with pytest.raises(VerificationError):
        merkle.verify_inclusion(b"\x00" * 32, 1, 2, client.inclusion_proof(1, 2), latest.root_hash)


def test_reading_tiles_needs_no_grpc(mirrored: _Mirrored, tmp_path: Path) -> None:
    """``monitor --tiles`` and ``receipt-fetch`` run without loading grpc, protobuf or rocksdict."""
    mirrored.grow(300)
    key = mirrored.signer.verifier().key_string()
    url = mirrored.folder.as_uri()
    digest = decode_leaf(7, mirrored.store.get_leaves([7])[0]).record_digest.hex()
    commands = [
        ["monitor", "--tiles", url, "--key", key, "--state", str(tmp_path / "s"), "--once",
         "--full-audit"],
        ["receipt-fetch", "--tiles", url, "--digest", digest, "--key", key,
         "--out", str(tmp_path / "r.json")],
    ]  # fmt: skip
    for args in commands:
        proc = processes.run(
            [sys.executable, "-c", OFFLINE_PROBE, *args], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "IMPORTED []" in proc.stdout
    receipt = Receipt.from_json((tmp_path / "r.json").read_text())
    assert receipt.index == 7 and receipt.tree_size == 300


def test_several_urls_fall_back_in_order(mirrored: _Mirrored, tmp_path: Path) -> None:
    """C2SP tlog-tiles mirrors: a URL that fails goes to the back, one that lacks an object
    (a mirror behind) is passed over, and 404 everywhere is still NotFoundError."""
    cp = mirrored.grow(300)
    dead = "http://127.0.0.1:1/"
    behind = (tmp_path / "empty").as_uri()  # a folder with nothing in it yet
    client = TileClient(f"{dead},{behind},{mirrored.folder.as_uri()}", timeout=2)
    assert client.checkpoint([mirrored.signer.verifier()]).checkpoint.size == cp.size
    assert client.base_urls[-1] == dead  # failed once: tried last from now on
    assert client.root(cp.size) == cp.root_hash
    with pytest.raises(NotFoundError):
        client.get("tile/0/999")
    only_dead = TileClient([dead, "http://127.0.0.1:2/"], timeout=2)
    with pytest.raises(ServiceError, match="no tiles URL answered"):
        only_dead.checkpoint_note()
    with pytest.raises(FormatError):
        TileClient(" , ")
