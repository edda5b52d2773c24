"""The log checks itself: damaged nodes, entries, digest index and tree state are caught before
a checkpoint is signed or a proof, entry or duplicate answer is served (DataLossError)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from ledger.core import merkle
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import DataLossError, InvalidArgumentError, LogFailedError, OutOfRangeError
from ledger.core.merkle import CompactRange
from ledger.core.tile_layout import bundle_key, tile_key
from ledger.core.types import AppendItem
from ledger.log.facade import Log
from ledger.store.contract import MemoryStore

ORIGIN = "ledger.test/selfcheck"


def items(n: int, tag: str = "") -> list[AppendItem]:
    return [AppendItem(hashlib.sha256(f"{tag}{i}".encode()).digest()) for i in range(n)]


def grown(n: int = 37) -> tuple[Log, MemoryStore]:
    store = MemoryStore()
    log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
    log.append(items(n))
    log.publish()
    return log, store


def test_an_intact_log_serves_verified_proofs_at_every_size() -> None:
    log, _ = grown()
    latest = log.latest_checkpoint()
    assert latest is not None
    for size in range(1, latest.size + 1):
        for p in log.inclusion_proofs(list(range(size)), size):
            merkle.verify_inclusion(p.leaf_hash, p.entry.index, size, p.hashes, log.root_at(size))
        log.consistency_proof(size, latest.size)
    assert len(log.entries(0, 100)) == 37


def damage_node(store: MemoryStore, row_offset: int, index: int) -> None:
    """Zero node ``index`` of a row of the level-0 tile value (rows 3..7 of 37 leaves: 4, 2,
    1, 0, 0 hashes; ``row_offset`` is where the row starts, in hashes)."""
    key = tile_key(0, 0)
    value = store._values[key]
    at = (row_offset + index) * 32
    store._values[key] = value[:at] + b"\x00" * 32 + value[at + 32 :]


def flip_leaf_byte(store: MemoryStore, index: int, at: int = 20) -> None:
    """Flip one byte of the leaf at ``index`` inside its entry bundle (plain leaves: 2 + 43)."""
    key = bundle_key(0)
    value = store._values[key]
    pos = index * 45 + 2 + at
    store._values[key] = value[:pos] + bytes([value[pos] ^ 1]) + value[pos + 1 :]


def test_a_damaged_node_is_never_served_in_a_proof() -> None:
    log, store = grown()
    damage_node(store, row_offset=0, index=1)  # height 3, index 1: leaves 8..15
    with pytest.raises(DataLossError, match="damaged"):
        log.inclusion_proof(0, 37)
    with pytest.raises(DataLossError):
        log.inclusion_proofs([0], 33)  # a historical size: tied to the signed root first
    with pytest.raises(DataLossError):
        log.consistency_proof(4, 37)


def test_a_damaged_entry_is_not_served() -> None:
    log, store = grown()
    flip_leaf_byte(store, 6)
    with pytest.raises(DataLossError, match="entries 0 to 7"):
        log.entries(0, 10)
    with pytest.raises(DataLossError):
        log.inclusion_proof(6, 0)
    flip_leaf_byte(store, 6)  # repaired
    flip_leaf_byte(store, 33)  # past the last full 8: checked against the tree state
    with pytest.raises(DataLossError, match=r"entries 32 to 35 .* tree state"):
        log.entries(33, 1)
    flip_leaf_byte(store, 33)  # repaired
    flip_leaf_byte(store, 6)
    flip_leaf_byte(store, 36)  # the unpaired last leaf
    flip_leaf_byte(store, 6)  # repaired
    with pytest.raises(DataLossError, match="entry 36"):
        log.entries(30, 10)


def test_a_damaged_digest_index_is_caught_on_read_and_on_dedup() -> None:
    log, store = grown()
    digest = items(37)[3].record_digest
    store._digests[digest] = 4
    with pytest.raises(DataLossError, match="index is damaged"):
        log.index_of(digest)
    with pytest.raises(DataLossError, match="index is damaged"):
        log.entry_by_digest(digest)
    with pytest.raises(DataLossError, match="index is damaged"):
        log.append([AppendItem(digest)])


def test_a_damaged_tree_state_is_never_signed_and_stops_appends() -> None:
    log, store = grown()
    log.append(items(5, "more"))
    state = store.load_state()
    hashes = list(state.compact.hashes)
    hashes[0] = b"\x01" * 32
    store._state = replace(state, compact=CompactRange(state.compact.size, hashes))
    reopened = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
    with pytest.raises(DataLossError, match="refusing to sign size 42"):
        reopened.publish()
    with pytest.raises(LogFailedError):
        reopened.append(items(1, "after"))
    assert store.latest_checkpoint().size == 37  # type: ignore[union-attr]


def test_index_beyond_an_explicit_size_is_invalid_argument() -> None:
    log, _ = grown()
    with pytest.raises(InvalidArgumentError, match="index: 40 >= tree_size 10"):
        log.inclusion_proof(40, 10)
    with pytest.raises(InvalidArgumentError, match="index: 10 >= tree_size 10"):
        log.inclusion_proof(10, 10)
    with pytest.raises(OutOfRangeError):
        log.inclusion_proof(40, 0)
