"""The witness's durable state: atomic check-and-update, persistence, bounded evidence."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ledger.core.checkpoint import CosignatureSigner, Ed25519Signer
from ledger.core.errors import FormatError, StorageError
from ledger.witness.core import LogRecord
from ledger.witness.state import Witness, load_evidence, load_records
from tests.witness_fixtures import ORIGIN, View, log_signer

NONE = LogRecord(origin=ORIGIN, size=0, root_hash=b"", note="")


def open_witness(folder: Path, signer: Ed25519Signer, **kw: int) -> Witness:
    return Witness(
        folder=folder,
        signer=CosignatureSigner.generate("witness.test/w1"),
        logs={ORIGIN: [signer.verifier()]},
        clock=lambda: 1_790_000_000.0,
        **kw,
    )


def forked_pair(signer: Ed25519Signer, common: int, extra: int) -> tuple[View, View]:
    """Two views sharing ``common`` entries, then ``extra`` different ones each."""
    a, b = View(signer, "same"), View(signer, "same")
    a.grow(common)
    b.grow(common)
    a.salt, b.salt = "a", "b"
    a.grow(extra)
    b.grow(extra)
    return a, b


def test_concurrent_valid_extensions_only_one_wins(tmp_path: Path) -> None:
    """Two valid extensions of size 5 with different roots, submitted 40 times at once from
    16 threads: exactly one is cosigned, the rest see the new size (the spec's race)."""
    signer = log_signer()
    a, b = forked_pair(signer, 5, 5)
    assert a.log.checkpoint(5).root_hash == b.log.checkpoint(5).root_hash  # both extend it
    assert a.log.checkpoint(10).root_hash != b.log.checkpoint(10).root_hash
    witness = open_witness(tmp_path, signer)
    assert witness.add_checkpoint(a.request(0, 5)).status == 200
    bodies = [a.request(5), b.request(5)] * 20
    start = threading.Event()

    def submit(body: bytes) -> tuple[int, str]:
        start.wait()
        decision = witness.add_checkpoint(body)
        return decision.status, decision.body

    with ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(submit, body) for body in bodies]
        start.set()
        answers = [f.result() for f in futures]
    assert sorted(s for s, _ in answers).count(200) == 1
    assert {s for s, _ in answers} == {200, 409}  # both were valid: no 422, only stale sizes
    assert all(body == "10\n" for status, body in answers if status == 409)
    winner = bodies[[s for s, _ in answers].index(200)]
    record = load_records(tmp_path)[ORIGIN]
    assert record.size == 10 and record.note.encode() in winner
    witness.close()


def test_state_survives_reopen_and_folder_is_exclusive(tmp_path: Path) -> None:
    signer = log_signer()
    view = View(signer)
    view.grow(3)
    witness = open_witness(tmp_path, signer)
    assert witness.add_checkpoint(view.request(0)).status == 200
    with pytest.raises(StorageError, match="in use"):
        open_witness(tmp_path, signer)
    witness.close()
    again = open_witness(tmp_path, signer)
    view.grow(2)
    assert again.add_checkpoint(view.request(0)).body == "3\n"
    assert again.add_checkpoint(view.request(3)).status == 200
    assert again.records[ORIGIN].size == 5
    again.close()


def test_evidence_is_deduplicated_and_bounded(tmp_path: Path) -> None:
    signer = log_signer()
    honest = View(signer, "h")
    honest.grow(4)
    witness = open_witness(tmp_path, signer, max_evidence=2)
    assert witness.add_checkpoint(honest.request(0)).status == 200
    forks = [View(signer, f"fork{i}") for i in range(3)]
    for fork in forks:
        fork.grow(4)
    for _ in range(3):  # replays of the same forked checkpoint add nothing
        assert witness.add_checkpoint(forks[0].request(4)).status == 409
    assert len(load_evidence(tmp_path)["items"]) == 1
    for fork in forks[1:]:
        fork.grow(3)
        assert witness.add_checkpoint(fork.request(4)).status == 422
    doc = load_evidence(tmp_path)
    assert len(doc["items"]) == 2 and doc["dropped"] == 1
    item = doc["items"][0]
    assert item["cosigned"] == honest.log.checkpoint(4).note
    assert item["submitted"] == forks[0].log.checkpoint(4).note
    witness.close()


def test_stale_requests_are_not_evidence(tmp_path: Path) -> None:
    signer = log_signer()
    view = View(signer)
    view.grow(4)
    witness = open_witness(tmp_path, signer)
    witness.add_checkpoint(view.request(0))
    view.grow(1)
    assert witness.add_checkpoint(view.request(1)).status == 409
    assert load_evidence(tmp_path)["items"] == []
    witness.close()


def test_corrupt_state_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "state.jsonl").write_text(json.dumps({"format": "something else"}) + "\n")
    with pytest.raises(FormatError, match="not a ledger-witness-state/v1"):
        open_witness(tmp_path, log_signer())
    # the folder lock was released: a fixed file opens
    (tmp_path / "state.jsonl").unlink()
    open_witness(tmp_path, log_signer()).close()


def test_journal_torn_tail_corruption_and_compaction(tmp_path: Path) -> None:
    signer = log_signer()
    view = View(signer)
    witness = open_witness(tmp_path, signer)
    for _ in range(5):
        old = witness.records.get(ORIGIN, NONE).size
        view.grow(2)
        assert witness.add_checkpoint(view.request(old)).status == 200
    witness.close()
    journal = tmp_path / "state.jsonl"
    good = journal.read_bytes()
    journal.write_bytes(good + b'{"origin": "ledger.te')  # a crash in the middle of an append
    assert load_records(tmp_path)[ORIGIN].size == 10
    again = open_witness(tmp_path, signer)  # cuts the torn line off, appends after it
    assert journal.read_bytes() == good
    view.grow(1)
    assert again.add_checkpoint(view.request(10)).status == 200
    again.close()
    assert load_records(tmp_path)[ORIGIN].size == 11
    lines = journal.read_bytes().split(b"\n")
    journal.write_bytes(b"\n".join([lines[0], b"{not json}", *lines[1:]]))
    with pytest.raises(FormatError, match=r"state\.jsonl:2: malformed"):
        open_witness(tmp_path, signer)


def test_journal_compacts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ledger.witness.journal.COMPACT_AT", 4)
    signer = log_signer()
    view = View(signer)
    witness = open_witness(tmp_path, signer)
    for old in range(7):
        view.grow(1)
        assert witness.add_checkpoint(view.request(old)).status == 200
    witness.close()
    assert len((tmp_path / "state.jsonl").read_text().splitlines()) <= 4
    assert load_records(tmp_path)[ORIGIN].size == 7


def test_malformed_body_is_400(tmp_path: Path) -> None:
    witness = open_witness(tmp_path, log_signer())
    decision = witness.add_checkpoint(b"garbage")
    assert decision.status == 400 and "empty line" in decision.body
    witness.close()
