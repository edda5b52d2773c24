"""Interop: the tile client reads Tessera's public test log (``tests/testdata/tessera-log``,
see its PROVENANCE) and verifies its 16 checkpoints, every inclusion proof and every
consistency proof between them, from its tiles and entry bundles alone."""

from __future__ import annotations

import pytest

from ledger.core import merkle
from ledger.core.checkpoint import Checkpoint, Ed25519Verifier, open_checkpoint
from ledger.core.errors import RootMismatchError
from ledger_client.remote.tiles import TileClient
from tests.vectors import TESSERA_LOG as TESSERA

KEY = "example.com/log/testdata+33d7b496+AeHTu4Q3hEIMHNqc6fASMsq3rKNx280NI+oO5xCFkkSx"
ORIGIN = "example.com/log/testdata"


@pytest.fixture(scope="module")
def log() -> tuple[TileClient, list[Checkpoint]]:
    verifier = Ed25519Verifier.from_key_string(KEY)
    checkpoints = []
    for n in range(16):
        note = (TESSERA / f"checkpoint.{n}").read_text()
        checkpoints.append(open_checkpoint(note, [verifier], origin=ORIGIN).checkpoint)
    return TileClient(TESSERA.as_uri()), checkpoints


def test_latest_checkpoint_verifies(log: tuple[TileClient, list[Checkpoint]]) -> None:
    client, checkpoints = log
    latest = client.checkpoint([Ed25519Verifier.from_key_string(KEY)], origin=ORIGIN).checkpoint
    assert latest == checkpoints[-1]
    assert [c.size for c in checkpoints] == list(range(16))


def test_roots_from_tiles(log: tuple[TileClient, list[Checkpoint]]) -> None:
    client, checkpoints = log
    for cp in checkpoints:
        assert client.root(cp.size) == cp.root_hash
        leaves = client.leaves(0, cp.size, cp.size)
        assert merkle.root(merkle.leaf_hash(leaf) for leaf in leaves) == cp.root_hash


def test_every_inclusion_proof(log: tuple[TileClient, list[Checkpoint]]) -> None:
    client, checkpoints = log
    count = 0
    for cp in checkpoints:
        for index, leaf in enumerate(client.leaves(0, cp.size, cp.size)):
            client.verify_inclusion(leaf, index, cp.size, cp.root_hash)
            count += 1
    assert count == sum(range(16))


def test_every_consistency_proof(log: tuple[TileClient, list[Checkpoint]]) -> None:
    client, checkpoints = log
    count = 0
    for old in checkpoints:
        for new in checkpoints[old.size :]:
            client.verify_consistency(old.size, old.root_hash, new.size, new.root_hash)
            count += 1
    assert count == 16 * 17 // 2


def test_a_wrong_root_fails(log: tuple[TileClient, list[Checkpoint]]) -> None:
    client, checkpoints = log
    with pytest.raises(RootMismatchError):
        client.verify_consistency(3, checkpoints[4].root_hash, 9, checkpoints[9].root_hash)
