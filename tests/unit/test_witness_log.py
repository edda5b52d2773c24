"""The log side of witnessing: stored checkpoints gain cosignature lines (never lose one, never
change body), ``[[witness]]`` configuration, and the receipt verifier's witness quorum."""

from __future__ import annotations

import re
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from ledger.app.settings import load_settings
from ledger.core.checkpoint import (
    Checkpoint,
    CosignatureSigner,
    NoteSignature,
    SignedNote,
    add_signatures,
    open_checkpoint,
)
from ledger.core.errors import FormatError, StorageError, WitnessError
from ledger.store.contract import MemoryStore, Store
from ledger.store.rocks import RocksStore
from ledger_client.receipts.receipt import Receipt
from ledger_client.receipts.verify import verify_receipt
from tests.witness_fixtures import View, log_signer

NOW = 1_790_000_000


def cosign(note: str, witness: CosignatureSigner) -> NoteSignature:
    return witness.cosign(Checkpoint.from_text(SignedNote.from_text(note).text), NOW)


@pytest.mark.parametrize("kind", ["memory", "rocks"])
def test_store_accepts_more_lines_only(kind: str, tmp_path: Path) -> None:
    store: Store = MemoryStore() if kind == "memory" else RocksStore(tmp_path / "db")
    view = View(log_signer())
    view.grow(4)
    published = view.log.checkpoint(0)
    store.put_checkpoint(published)
    w1, w2 = CosignatureSigner.generate("w1.test"), CosignatureSigner.generate("w2.test")
    more = replace(published, note=add_signatures(published.note, [cosign(published.note, w1)]))
    store.put_checkpoint(more)
    assert store.get_checkpoint(4) == more and store.latest_checkpoint() == more
    fewer = replace(more, note=add_signatures(published.note, [cosign(published.note, w2)]))
    with pytest.raises(StorageError, match="only signature lines"):
        store.put_checkpoint(fewer)  # would drop w1's line
    other = View(log_signer(), "x")
    other.grow(4)
    with pytest.raises(StorageError, match="second checkpoint"):
        store.put_checkpoint(other.log.checkpoint(4))
    store.close()


def test_log_adds_cosignatures_to_stored_and_latest() -> None:
    view = View(log_signer())
    view.grow(3)
    first = view.log.checkpoint(3)
    view.grow(2)
    w1 = CosignatureSigner.generate("w1.test")
    updated = view.log.add_cosignatures(3, [cosign(first.note, w1)])
    assert view.log.checkpoint(3) == updated and view.log.latest_checkpoint() != updated
    again = view.log.add_cosignatures(3, [cosign(first.note, w1)])  # a second line: first kept
    assert again.note == updated.note
    latest = view.log.checkpoint(0)
    view.log.add_cosignatures(5, [cosign(latest.note, w1)])
    opened = open_checkpoint(
        view.log.checkpoint(0).note,
        [view.signer.verifier()],
        witnesses=[w1.verifier()],
        min_witnesses=1,
    )
    assert opened.checkpoint.size == 5


def test_witness_config(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    key = CosignatureSigner.generate("w1.test").verifier().key_string()
    config.write_text(
        f'[witnessing]\nquorum = 1\n[[witness]]\nname = "w1"\nurl = "http://h:1"\nkey = "{key}"\n'
    )
    settings = load_settings(config)
    assert settings.witness_quorum == 1 and settings.witnesses[0].key == key
    config.write_text('[[witness]]\nname = "w1"\nurl = "http://h:1"\n')
    with pytest.raises(FormatError, match=re.escape("[[witness]] #1 key: Field required")):
        load_settings(config)
    config.write_text('[[witness]]\nname = "w1"\nurl = "http://h:1"\nkey = "w+00+AA=="\n')
    with pytest.raises(FormatError, match=re.escape("[[witness]] #1 key: ")):
        load_settings(config)
    entry = f'[[witness]]\nname = "w"\nurl = "http://h:1"\nkey = "{key}"\n'
    config.write_text(f"[witnessing]\nquorum = 2\n{entry}")
    with pytest.raises(FormatError, match=re.escape("[witnessing] quorum: 2 needs 0..1")):
        load_settings(config)


def test_receipt_quorum(tmp_path: Path) -> None:
    view = View(log_signer())
    view.grow(6)
    w1 = CosignatureSigner.generate("w1.test")
    note = view.log.checkpoint(6).note
    proof = view.log.inclusion_proof(2, 6)
    base = Receipt(
        record_digest=proof.entry.record_digest,
        leaf=proof.entry.leaf,
        index=2,
        tree_size=6,
        inclusion_proof=proof.hashes,
        checkpoint=note,
        anchors=(),
    )
    keys = [view.signer.verifier()]
    with pytest.raises(WitnessError, match="1 required"):
        verify_receipt(base, keys, witnesses=[w1.verifier()], min_witnesses=1)
    cosigned = replace(base, checkpoint=add_signatures(note, [cosign(note, w1)]))
    report = verify_receipt(cosigned, keys, witnesses=[w1.verifier()], min_witnesses=1)
    assert [c.name for c in report.cosigned_by] == ["w1.test"]
    assert report.to_json_obj()["cosigned_by"] == [
        {"witness": f"w1.test+{w1.key_id.hex()}", "time": NOW}
    ]


def test_cosigning_concurrently_with_appends_and_publishing() -> None:
    """add_cosignatures (own lock) racing the writer: latest is always the newest size, and
    every stored checkpoint keeps every line it was given."""
    view = View(log_signer())
    view.grow(1)
    w1 = CosignatureSigner.generate("w1.test")
    stop = threading.Event()
    cosigned: list[int] = []

    def cosigner() -> None:
        while not stop.is_set():
            latest = view.log.latest_checkpoint()
            assert latest is not None
            view.log.add_cosignatures(latest.size, [cosign(latest.note, w1)])
            cosigned.append(latest.size)

    thread = threading.Thread(target=cosigner)
    thread.start()
    sizes = [view.grow(3).size for _ in range(300)]
    stop.set()
    thread.join()
    latest = view.log.latest_checkpoint()
    assert latest is not None and latest.size == sizes[-1]
    assert len(cosigned) > 10
    for size in set(cosigned):
        note = view.log.checkpoint(size).note
        assert open_checkpoint(note, [view.signer.verifier()], witnesses=[w1.verifier()],
                               min_witnesses=1).checkpoint.size == size  # fmt: skip
