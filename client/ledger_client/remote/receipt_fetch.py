"""Fetching and upgrading receipts (``ledger_client.receipts.receipt``) from a log server.

Talks to the server only through a ``RemoteLog`` the caller passes in, so importing this module
imports neither grpc nor the generated code (``ledger_client.remote.log`` is imported for
typing only). Failures surface as the ledger's error tree (``RemoteLog`` translates statuses).

* ``fetch_receipts``: the receipts of many record digests in one round trip (``GetReceipts``),
  all on one checkpoint: by default the earliest anchored checkpoint that covers every entry
  (the tightest "existed by" time the log can prove), else the latest, without anchors.
  ``fetch_receipt`` is the same for one digest.
* ``upgrade_receipt``: the same record under a newer checkpoint (by default the newest anchored
  one): a fresh inclusion proof at the new size, plus the old checkpoint (with any cosignatures
  added since), the RFC 9162 §2.1.4 consistency proof from it and its anchors as ``previous``,
  so both stay checkable. Only the checkpoint the receipt is upgraded from is kept.

* ``refresh_cosignatures``: the same receipt with the witness cosignatures that the log added
  to its checkpoint since (same checkpoint body; a different root for the size is a fork:
  ``InconsistencyError`` with both notes).
* ``witnessed_receipt``: a receipt whose checkpoint carries ``min_witnesses`` valid
  cosignatures of the given witnesses: refreshed at its size, else upgraded to the latest
  checkpoint when that one has them (witnesses skip checkpoints that were superseded while they
  were busy); None when neither has them yet (ask again later).

These do not verify the log's signatures or anchors (the recipient does, with
``verify_receipt``); they check that the server's answers fit the request (same record digest,
same leaf, right sizes). ``witnessed_receipt`` counts only cosignature lines that verify with
the given witness keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ledger.core.checkpoint import SignedNote, Verifier, verify_signatures
from ledger.core.errors import (
    InconsistencyError,
    NotFoundError,
    NotYetPublishedError,
    RecordError,
)
from ledger.core.limits import MAX_ANCHORED_SIZES, MAX_PROOFS_PER_CALL
from ledger.core.types import Anchor, PublishedCheckpoint, ReceiptBundle
from ledger.records import decision as records
from ledger.records.commitments import Disclosure
from ledger.timestamp.rfc3161 import token_certificates
from ledger_client.receipts.receipt import PreviousCheckpoint, Receipt, ReceiptAnchor

if TYPE_CHECKING:
    from ledger_client.remote.log import RemoteLog

__all__ = [
    "count_cosignatures",
    "fetch_receipt",
    "fetch_receipts",
    "refresh_cosignatures",
    "upgrade_receipt",
    "witnessed_receipt",
]


def _receipt_anchors(anchors: Sequence[Anchor]) -> tuple[ReceiptAnchor, ...]:
    return tuple(
        ReceiptAnchor(tsa=a.tsa, token=a.token, certificates=tuple(token_certificates(a.token)))
        for a in anchors
    )


def _anchored_at(remote: RemoteLog, size: int) -> tuple[PublishedCheckpoint, list[Anchor]]:
    checkpoint, anchors = remote.anchors(size)
    if checkpoint.size != size or any(a.size != size for a in anchors):
        raise InconsistencyError(f"server answered anchors of size {checkpoint.size} for {size}")
    return checkpoint, anchors


def _latest(remote: RemoteLog, newer_than: int) -> tuple[PublishedCheckpoint, list[Anchor]]:
    """The latest checkpoint (with its anchors, if it has any); its size must exceed the bound."""
    checkpoint = remote.checkpoint()
    if checkpoint.size <= newer_than:
        raise NotYetPublishedError(
            f"the latest checkpoint has size {checkpoint.size}; a size above {newer_than} is needed"
        )
    if checkpoint.size in remote.anchored_sizes(MAX_ANCHORED_SIZES):
        return _anchored_at(remote, checkpoint.size)
    return checkpoint, []


def _check_bundle(bundle: ReceiptBundle, digests: Sequence[bytes]) -> None:
    """The server's answer must fit the request: one proof per digest, all at its checkpoint."""
    size = bundle.checkpoint.size
    if len(bundle.proofs) != len(digests):
        raise InconsistencyError(f"server answered {len(bundle.proofs)} proofs for {len(digests)}")
    for digest, proof in zip(digests, bundle.proofs, strict=True):
        if proof.entry.record_digest != digest or proof.tree_size != size:
            raise InconsistencyError(
                f"server answered a proof for {proof.entry.record_digest.hex()} at size "
                f"{proof.tree_size}, asked {digest.hex()} at {size}"
            )
    if any(a.size != size for a in bundle.anchors):
        raise InconsistencyError(f"server answered anchors of another size than {size}")


def fetch_receipts(
    remote: RemoteLog,
    record_digests: Sequence[bytes],
    *,
    prefer_anchored: bool = True,
    tree_size: int = 0,
) -> list[Receipt]:
    """Receipts of the logged records ``record_digests`` (see the module docstring), one round
    trip per ``MAX_PROOFS_PER_CALL`` digests; ``tree_size`` asks for that checkpoint's size.
    Raises ``NotYetPublishedError`` when no checkpoint covers every entry yet."""
    receipts: list[Receipt] = []
    for at in range(0, len(record_digests), MAX_PROOFS_PER_CALL):
        chunk = record_digests[at : at + MAX_PROOFS_PER_CALL]
        bundle = remote.receipts(chunk, tree_size=tree_size, prefer_anchored=prefer_anchored)
        _check_bundle(bundle, chunk)
        anchors = _receipt_anchors(bundle.anchors)
        receipts.extend(
            Receipt(
                record_digest=proof.entry.record_digest,
                leaf=proof.entry.leaf,
                index=proof.entry.index,
                tree_size=proof.tree_size,
                inclusion_proof=proof.hashes,
                checkpoint=bundle.checkpoint.note,
                anchors=anchors,
            )
            for proof in bundle.proofs
        )
    return receipts


def fetch_receipt(
    remote: RemoteLog,
    record_digest: bytes,
    *,
    record: records.DecisionRecord | None = None,
    disclosures: Sequence[Disclosure] = (),
    prefer_anchored: bool = True,
) -> Receipt:
    """The receipt of the logged record ``record_digest`` (see the module docstring).

    ``record`` (which must hash to the digest) and ``disclosures`` (opened fields of it) are
    carried in the receipt. Raises ``RecordError`` for a record that does not match,
    ``NotYetPublishedError`` when no checkpoint covers the entry yet.
    """
    if record is not None and records.record_digest(record) != record_digest:
        raise RecordError(
            f"record hashes to {records.record_digest(record).hex()}, not {record_digest.hex()}"
        )
    (receipt,) = fetch_receipts(remote, [record_digest], prefer_anchored=prefer_anchored)
    return replace(receipt, record=record, disclosures=tuple(disclosures))


def _newer(
    remote: RemoteLog, size: int, anchored: bool
) -> tuple[PublishedCheckpoint, list[Anchor]]:
    if not anchored:
        return _latest(remote, size)
    newest = remote.anchored_sizes(1)
    if not newest or newest[0] <= size:
        raise NotFoundError(f"no anchored checkpoint is newer than size {size}")
    return _anchored_at(remote, newest[0])


def upgrade_receipt(remote: RemoteLog, receipt: Receipt, *, anchored: bool = True) -> Receipt:
    """``receipt`` moved to the newest anchored checkpoint (``anchored=False``: the latest).

    The old checkpoint kept in ``previous`` first gains the cosignatures the log added to it
    since (``refresh_cosignatures``). Raises ``NotFoundError`` (``NotYetPublishedError``) when
    there is no newer one, and ``InconsistencyError`` if the server's leaf at the receipt's
    index, or its checkpoint for the receipt's size, differs from the receipt's (evidence of a
    rewritten log).
    """
    checkpoint, anchors = _newer(remote, receipt.tree_size, anchored)
    receipt = refresh_cosignatures(remote, receipt)
    return _upgrade_to(remote, receipt, checkpoint, anchors)


def _upgrade_to(
    remote: RemoteLog, receipt: Receipt, checkpoint: PublishedCheckpoint, anchors: list[Anchor]
) -> Receipt:
    proof = remote.inclusion_proof(index=receipt.index, tree_size=checkpoint.size)
    if proof.entry.leaf != receipt.leaf:
        raise InconsistencyError(
            f"the log's leaf {receipt.index} at size {checkpoint.size} differs from the receipt's",
            evidence={"index": receipt.index, "receipt_leaf": receipt.leaf.hex(),
                      "server_leaf": proof.entry.leaf.hex()},
        )  # fmt: skip
    consistency = remote.consistency_proof(receipt.tree_size, checkpoint.size)
    previous = PreviousCheckpoint(
        checkpoint=receipt.checkpoint,
        consistency_proof=consistency.hashes,
        anchors=receipt.anchors,
    )
    return replace(
        receipt,
        tree_size=checkpoint.size,
        inclusion_proof=proof.hashes,
        checkpoint=checkpoint.note,
        anchors=_receipt_anchors(anchors),
        previous=previous,
    )


def refresh_cosignatures(remote: RemoteLog, receipt: Receipt) -> Receipt:
    """``receipt`` with the checkpoint note the log now serves for its size (more cosignature
    lines, same body); ``InconsistencyError`` when the log serves another body for the size."""
    served = remote.checkpoint(receipt.tree_size)
    old, new = SignedNote.from_text(receipt.checkpoint), SignedNote.from_text(served.note)
    if served.size != receipt.tree_size or new.text != old.text:
        raise InconsistencyError(
            f"the log serves another checkpoint for size {receipt.tree_size} than the receipt's",
            evidence={"receipt_checkpoint": receipt.checkpoint, "served": served.note},
        )
    kept = {(s.name, s.key_id) for s in new.signatures}
    lines = new.signatures + tuple(s for s in old.signatures if (s.name, s.key_id) not in kept)
    return replace(receipt, checkpoint=SignedNote(text=new.text, signatures=lines).to_text())


def count_cosignatures(note: str, witnesses: Sequence[Verifier]) -> int:
    """How many of ``witnesses`` have a valid cosignature line on the signed ``note``."""
    if not witnesses:
        return 0
    valid = verify_signatures(SignedNote.from_text(note), witnesses)
    return len({(s.name, s.key_id) for s in valid})


def witnessed_receipt(
    remote: RemoteLog, receipt: Receipt, witnesses: Sequence[Verifier], min_witnesses: int
) -> Receipt | None:
    """``receipt`` on a checkpoint cosigned by ``min_witnesses`` of ``witnesses`` (see the module
    docstring), or None when no such checkpoint covers it yet."""
    if count_cosignatures(receipt.checkpoint, witnesses) >= min_witnesses:
        return receipt
    refreshed = refresh_cosignatures(remote, receipt)
    if count_cosignatures(refreshed.checkpoint, witnesses) >= min_witnesses:
        return refreshed
    latest = remote.checkpoint()
    if latest.size <= receipt.tree_size:
        return None
    if count_cosignatures(latest.note, witnesses) < min_witnesses:
        return None
    return _upgrade_to(remote, refreshed, latest, [])
