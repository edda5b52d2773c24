"""Fetching and upgrading receipts (``ledger_client.receipts.receipt``) from a C2SP tlog-tiles
URL: an auditor needs neither gRPC nor the log's server, only its tiles (the endpoint, a
mirror, a CDN).

* ``fetch_receipt_from_tiles``: the receipt of one record digest on the latest checkpoint (its
  signature and origin verified), with the inclusion proof built from tiles and verified against
  that checkpoint's root. Tiles cannot be searched by digest: give the entry's ``index`` when
  known; otherwise the entry bundles are scanned from the newest back.
* A log published to a bucket (``ledger.objstore.publisher``) also holds ``anchors/latest`` (the
  newest anchored size), ``anchors/<size>`` (its RFC 3161 tokens) and ``checkpoints/<size>``
  (that checkpoint's note with its cosignatures): when they are there and that checkpoint covers
  the entry, the receipt is made on it, with its anchors, from the bucket alone. Elsewhere (the
  log's HTTP endpoint, a mirror folder) the receipt has no anchors (upgrade it over gRPC, or
  verify it without anchors).
* ``upgrade_receipt_from_tiles``: the same record under a newer checkpoint (the bucket's newest
  anchored one when it is newer, else the latest), with a fresh inclusion proof, and the old
  checkpoint, its anchors and the RFC 9162 §2.1.4 consistency proof from it in ``previous``. The
  leaf at the receipt's index must be the receipt's leaf, and the consistency proof must verify,
  else ``InconsistencyError`` (evidence of a rewritten log).
"""

from __future__ import annotations

import json
from base64 import b64decode
from binascii import Error as Base64Error
from collections.abc import Sequence
from dataclasses import replace

from ledger.core import tiles
from ledger.core.checkpoint import Checkpoint, Verifier, open_checkpoint
from ledger.core.errors import (
    FormatError,
    InconsistencyError,
    LedgerError,
    NotFoundError,
    NotYetPublishedError,
    RecordError,
    VerificationError,
)
from ledger.core.note import SignedNote
from ledger.core.types import decode_leaf
from ledger.records import decision as records
from ledger.records.commitments import Disclosure
from ledger.timestamp.rfc3161 import token_certificates
from ledger_client.receipts.receipt import PreviousCheckpoint, Receipt, ReceiptAnchor
from ledger_client.remote.tiles import TileClient

__all__ = [
    "anchored_from_bucket",
    "fetch_receipt_from_tiles",
    "find_index",
    "upgrade_receipt_from_tiles",
]

Anchored = tuple[Checkpoint, str, tuple[ReceiptAnchor, ...]]


def find_index(client: TileClient, record_digest: bytes, size: int) -> int:
    """The index of ``record_digest`` in the tree of ``size``, scanning bundles newest first."""
    last = (size - 1) // tiles.TILE_WIDTH if size else -1
    for bundle in range(last, -1, -1):
        first = bundle * tiles.TILE_WIDTH
        leaves = client.leaves(first, tiles.tile_width(0, bundle, size), size)
        for offset in range(len(leaves) - 1, -1, -1):
            if decode_leaf(first + offset, leaves[offset]).record_digest == record_digest:
                return first + offset
    raise NotFoundError(f"record_digest {record_digest.hex()} is not in the tree of size {size}")


def _latest(
    client: TileClient, verifiers: Sequence[Verifier], origin: str | None
) -> tuple[Checkpoint, str]:
    """The latest checkpoint, its signature and origin verified, and its note."""
    note = client.checkpoint_note()
    return open_checkpoint(note, verifiers, origin=origin).checkpoint, note


def anchored_from_bucket(
    client: TileClient, verifiers: Sequence[Verifier], origin: str | None
) -> Anchored | None:
    """The bucket's newest anchored checkpoint (verified), its note and anchors; None where the
    tiles come without them (module docstring)."""
    try:
        text = client.get("anchors/latest").decode("ascii").strip()
    except (NotFoundError, UnicodeDecodeError):
        return None
    if not text.isdigit():
        raise FormatError(f"{client.base_url}anchors/latest is not a size: {text[:40]!r}")
    size = int(text)
    note = client.get(f"checkpoints/{size}").decode("utf-8", "replace")
    checkpoint = open_checkpoint(note, verifiers, origin=origin).checkpoint
    try:
        obj = json.loads(client.get(f"anchors/{size}"))
        anchors = tuple(
            ReceiptAnchor(
                tsa=str(a["tsa"]),
                token=(token := b64decode(str(a["token"]), validate=True)),
                certificates=tuple(token_certificates(token)),
            )
            for a in obj["anchors"]
        )
        stated = int(obj["size"])
    except (ValueError, KeyError, TypeError, Base64Error, LedgerError) as exc:
        raise FormatError(f"{client.base_url}anchors/{size}: {exc}") from None
    if checkpoint.size != size or stated != size:
        raise InconsistencyError(
            f"{client.base_url}: checkpoints/{size} and anchors/{size} are of size "
            f"{checkpoint.size} and {stated}"
        )
    return checkpoint, note, anchors


def fetch_receipt_from_tiles(
    client: TileClient,
    record_digest: bytes,
    *,
    verifiers: Sequence[Verifier],
    origin: str | None = None,
    index: int | None = None,
    record: records.DecisionRecord | None = None,
    disclosures: Sequence[Disclosure] = (),
) -> Receipt:
    """The receipt of ``record_digest`` on the latest checkpoint (module docstring)."""
    if record is not None and records.record_digest(record) != record_digest:
        raise RecordError(
            f"record hashes to {records.record_digest(record).hex()}, not {record_digest.hex()}"
        )
    checkpoint, note = _latest(client, verifiers, origin)
    if index is None:
        index = find_index(client, record_digest, checkpoint.size)
    anchors: tuple[ReceiptAnchor, ...] = ()
    anchored = anchored_from_bucket(client, verifiers, origin)
    if anchored is not None and index < anchored[0].size <= checkpoint.size:
        checkpoint, note, anchors = anchored
    if index >= checkpoint.size:
        raise NotYetPublishedError(
            f"index {index} is not covered by the latest checkpoint (size {checkpoint.size})"
        )
    (leaf,) = client.leaves(index, 1, checkpoint.size)
    if decode_leaf(index, leaf).record_digest != record_digest:
        raise NotFoundError(f"entry {index} is not record_digest {record_digest.hex()}")
    proof = client.verify_inclusion(leaf, index, checkpoint.size, checkpoint.root_hash)
    return Receipt(
        record_digest=record_digest,
        leaf=leaf,
        index=index,
        tree_size=checkpoint.size,
        inclusion_proof=tuple(proof),
        checkpoint=note,
        anchors=anchors,
        record=record,
        disclosures=tuple(disclosures),
    )


def upgrade_receipt_from_tiles(
    client: TileClient,
    receipt: Receipt,
    *,
    verifiers: Sequence[Verifier],
    origin: str | None = None,
) -> Receipt:
    """``receipt`` moved to a newer checkpoint (module docstring)."""
    checkpoint, note = _latest(client, verifiers, origin)
    anchors: tuple[ReceiptAnchor, ...] = ()
    anchored = anchored_from_bucket(client, verifiers, origin)
    if anchored is not None and receipt.tree_size < anchored[0].size <= checkpoint.size:
        checkpoint, note, anchors = anchored
    if checkpoint.size <= receipt.tree_size:
        raise NotFoundError(
            f"the latest checkpoint (size {checkpoint.size}) is not newer than the receipt's "
            f"(size {receipt.tree_size})"
        )
    old = Checkpoint.from_text(SignedNote.from_text(receipt.checkpoint).text)
    (leaf,) = client.leaves(receipt.index, 1, checkpoint.size)
    if leaf != receipt.leaf:
        raise InconsistencyError(
            f"the log's leaf {receipt.index} at size {checkpoint.size} differs from the receipt's",
            evidence={"index": receipt.index, "receipt_leaf": receipt.leaf.hex(),
                      "served_leaf": leaf.hex()},
        )  # fmt: skip
    try:
        proof = client.verify_inclusion(leaf, receipt.index, checkpoint.size, checkpoint.root_hash)
        consistency = client.verify_consistency(
            old.size, old.root_hash, checkpoint.size, checkpoint.root_hash
        )
    except VerificationError as exc:
        raise InconsistencyError(
            f"the tiles of size {checkpoint.size} do not extend the receipt's size {old.size}: "
            f"{exc}",
            evidence={"old_checkpoint": receipt.checkpoint, "new_checkpoint": note},
        ) from exc
    previous = PreviousCheckpoint(
        checkpoint=receipt.checkpoint, consistency_proof=tuple(consistency), anchors=receipt.anchors
    )
    return replace(
        receipt,
        tree_size=checkpoint.size,
        inclusion_proof=tuple(proof),
        checkpoint=note,
        anchors=anchors,
        previous=previous,
    )
