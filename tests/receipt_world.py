"""Receipts built offline: an in-memory log of v1 leaves (``World``) with RFC 6962 proofs,
Ed25519-signed checkpoints and RFC 3161 anchors from an in-process TSA, and one complete run of
decision records logged in it. Shared by the receipt, run, CLI, property and audit tests."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from cryptography import x509

from ledger.core import merkle
from ledger.core.checkpoint import Checkpoint, Ed25519Signer, Ed25519Verifier, sign_checkpoint
from ledger.core.jcs import canonical_bytes
from ledger.core.types import encode_leaf
from ledger.records.commitments import Disclosure, commit
from ledger.records.decision import (
    DecisionRecord,
    MemoryWrite,
    ToolCall,
    new_record_id,
    record_digest,
)
from ledger.records.runs import run_closed_record, run_steps
from ledger.timestamp.rfc3161 import build_request, imprint_for_checkpoint_body, token_from_response
from ledger.tsa.authority import TsaAuthority
from ledger_client.receipts.receipt import (
    PreviousCheckpoint,
    Receipt,
    ReceiptAnchor,
)

ORIGIN = "ledger.example.com/receipts"
T0 = 1_750_000_000_000
TIME = "2025-06-15T15:06:40Z"
SALT = bytes(range(16))


def make_record(step: int, *, run: str = "run-r", parents: Sequence[str] = ()) -> DecisionRecord:
    return DecisionRecord(
        record_id=new_record_id(now_ms=T0 + step, rand=step.to_bytes(10, "big")),
        run_id=run,
        step=step,
        time=TIME,
        agent="agent-r",
        parent_digests=tuple(parents),
        payload=ToolCall(tool=f"tool-{step}", inputs_used=tuple(parents)),
    )


@cache
def tsa(name: str = "Receipt Test TSA") -> TsaAuthority:
    return TsaAuthority.generate(name)


def stamp(authority: TsaAuthority, body: bytes) -> bytes:
    request = build_request(imprint_for_checkpoint_body(body))
    return token_from_response(authority.respond(request.der))


class World:
    """An in-memory log of v1 leaves, one per digest, with signed and anchored checkpoints."""

    def __init__(self, digests: Sequence[bytes], signer: Ed25519Signer | None = None) -> None:
        self.signer = signer or Ed25519Signer(name=ORIGIN, seed=hashlib.sha256(b"w").digest())
        self.leaves = [encode_leaf(d, T0 + 1000 * i) for i, d in enumerate(digests)]
        self.hashes = [merkle.leaf_hash(leaf) for leaf in self.leaves]
        self._notes: dict[int, str] = {}
        self._tokens: dict[tuple[int, str], bytes] = {}

    @property
    def key(self) -> Ed25519Verifier:
        return self.signer.verifier()

    def _lookup(self, ids: Sequence[merkle.NodeID]) -> list[bytes]:
        return [merkle.root(self.hashes[n.begin : n.end]) for n in ids]

    def note(self, size: int) -> str:
        if size not in self._notes:
            root = merkle.root(self.hashes[:size])
            cp = Checkpoint(origin=self.signer.name, size=size, root_hash=root)
            self._notes[size] = sign_checkpoint(cp, self.signer)
        return self._notes[size]

    def anchor(self, size: int, authority: TsaAuthority | None = None) -> ReceiptAnchor:
        authority = authority or tsa()
        name = authority.tsa_cert.subject.rfc4514_string()
        if (size, name) not in self._tokens:
            body = Checkpoint.from_text(self.note(size).split("\n\n")[0] + "\n").body_bytes()
            self._tokens[size, name] = stamp(authority, body)
        token = self._tokens[size, name]
        return ReceiptAnchor(tsa=name, token=token, certificates=())

    def inclusion(self, index: int, size: int) -> tuple[bytes, ...]:
        nodes = merkle.inclusion_proof_nodes(index, size)
        return tuple(merkle.fold_proof_nodes(nodes, self._lookup))

    def consistency(self, size1: int, size2: int) -> tuple[bytes, ...]:
        if size1 == size2:
            return ()
        nodes = merkle.consistency_proof_nodes(size1, size2)
        return tuple(merkle.fold_proof_nodes(nodes, self._lookup))

    def receipt(self, index: int, size: int, *, anchored: bool = True, **extra: Any) -> Receipt:
        return Receipt(
            record_digest=self.leaves[index][9:41],
            leaf=self.leaves[index],
            index=index,
            tree_size=size,
            inclusion_proof=self.inclusion(index, size),
            checkpoint=self.note(size),
            anchors=(self.anchor(size),) if anchored else (),
            **extra,
        )

    def upgrade(self, receipt: Receipt, size: int) -> Receipt:
        previous = PreviousCheckpoint(
            checkpoint=receipt.checkpoint,
            consistency_proof=self.consistency(receipt.tree_size, size),
            anchors=receipt.anchors,
        )
        return replace(
            receipt,
            tree_size=size,
            inclusion_proof=self.inclusion(receipt.index, size),
            checkpoint=self.note(size),
            anchors=(self.anchor(size),),
            previous=previous,
        )


def filler(n: int, salt: str = "f") -> list[bytes]:
    return [hashlib.sha256(f"{salt}{i}".encode()).digest() for i in range(n)]


RECORD = make_record(3)
SECRET, DISCLOSURE = commit({"address": "1 Main St"}, SALT, field_path="payload.value")
DISCLOSED = DecisionRecord(
    record_id=new_record_id(now_ms=T0, rand=bytes(10)),
    run_id="run-r",
    step=9,
    time=TIME,
    agent="agent-r",
    payload=MemoryWrite(key="user.address", value=SECRET, source="user", trust_label="trusted"),
)


@cache
def world() -> World:
    digests = filler(20)
    digests[5] = record_digest(RECORD)
    digests[11] = record_digest(DISCLOSED)
    return World(digests)


def roots() -> list[x509.Certificate]:
    return [tsa().root_cert]


def full_receipt() -> Receipt:
    """Index 11 with record, disclosure and a previous anchored checkpoint."""
    w = world()
    old = w.receipt(11, 13, record=DISCLOSED, disclosures=(DISCLOSURE,))
    return w.upgrade(old, 20)


# --- one complete run, logged among filler and followed by an intruder


RUN = "run-cli"


def run_records(n: int = 4) -> list[DecisionRecord]:
    body: list[DecisionRecord] = []
    for step in range(n):
        parents = [record_digest(body[-1]).hex()] if body else []
        body.append(make_record(step, run=RUN, parents=parents))
    return [*body, run_closed_record(RUN, run_steps(body), agent="agent-r", time=TIME)]


RECORDS = run_records()
INTRUDER = make_record(9, run=RUN)


@cache
def logged(order: tuple[int, ...] = (0, 1, 2, 3, 4)) -> tuple[World, dict[bytes, int]]:
    """A log holding filler, the run's records in ``order``, then the intruder."""
    digests = [*filler(3, "c"), *(record_digest(RECORDS[i]) for i in order)]
    digests.append(record_digest(INTRUDER))
    return World(digests), {d: i for i, d in enumerate(digests)}


def item(record: DecisionRecord, order: tuple[int, ...] = (0, 1, 2, 3, 4)) -> dict[str, Any]:
    w, index = logged(order)
    receipt = w.receipt(index[record_digest(record)], len(w.leaves))
    return {"record": record.to_json_obj(), "receipt": receipt.to_json_obj()}


def items(order: tuple[int, ...] = (0, 1, 2, 3, 4)) -> list[dict[str, Any]]:
    return [item(r, order) for r in RECORDS]


def key() -> str:
    return logged()[0].key.key_string()


def write_private_and_root(
    folder: Path, name: str, disclosures: Mapping[str, Sequence[Disclosure]]
) -> dict[str, Path]:
    """The auditor's disclosures file ``folder/name`` (one line per record digest) and the TSA's
    root beside ``folder``: ``{"private": ..., "root": ...}``."""
    private = folder / name
    private.write_bytes(
        b"".join(
            canonical_bytes({"record_digest": d, "disclosures": [x.to_json_obj() for x in ds]})
            + b"\n"
            for d, ds in disclosures.items()
        )
    )
    root = folder.parent / "root.pem"
    root.write_bytes(tsa().root_pem())
    return {"private": private, "root": root}
