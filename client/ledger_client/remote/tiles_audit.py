"""A full check of a log published as C2SP tlog-tiles (a bucket's HTTP endpoint, a CDN, a mirror
folder, the log's own endpoint): ``ledger fsck --tiles URL --key VKEY``, with no data dir.

``audit_tiles`` fetches and verifies the checkpoint (signature by a given key, origin), then reads
every entry bundle of its tree once, in order, and checks:

* each entry is a v1 leaf and the log's receive times never decrease;
* every hash tile of every level, full and partial (the widths of the signed size), holds
  exactly the hashes recomputed from the entries (RFC 6962 leaf and node hashes);
* the root recomputed from the entries is the checkpoint's;
* where the publisher left them (``ledger.objstore.publisher``): ``checkpoints/<size>`` of the
  signed size has the same body, and the newest anchored checkpoint (``anchors/latest``) is
  signed by the log, has the root the entries give at its size, and each of its RFC 3161 tokens
  is over that checkpoint's body and chains to the TSA roots given (a TSA without roots is
  counted as unchecked).

Each problem names what and where (``TilesProblem``); at most ``MAX_PROBLEMS`` are kept.
``tsa_roots`` maps a TSA name to its root certificates (``cryptography`` ``x509.Certificate``).
Memory: one hash per entry of the level being checked (32 bytes an entry).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.core import merkle, tiles
from ledger.core.checkpoint import Checkpoint, Verifier
from ledger.core.errors import LedgerError, NotFoundError
from ledger.core.note import SignedNote
from ledger.core.types import decode_leaf
from ledger.timestamp.rfc3161 import imprint_for_checkpoint_body, verify_token
from ledger_client.remote.receipt_tiles import anchored_from_bucket
from ledger_client.remote.tiles import TileClient

__all__ = ["TilesProblem", "TilesReport", "audit_tiles"]

MAX_PROBLEMS = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class TilesProblem:
    """One thing that is wrong: what (checkpoint, entry, tile, root, anchor), where, detail."""

    what: str
    where: str
    detail: str

    def __str__(self) -> str:
        return f"{self.what} {self.where}: {self.detail}"


@dataclass(slots=True)
class TilesReport:
    """What the audit checked and found."""

    url: str
    size: int = 0
    problems: list[TilesProblem] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    unchecked: int = 0  # anchors of a TSA with no roots given
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems

    def add(self, what: str, where: object, detail: str) -> None:
        """Record a problem (the first ``MAX_PROBLEMS``)."""
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(TilesProblem(what=what, where=str(where), detail=detail))

    def count(self, what: str, n: int = 1) -> None:
        """Count ``n`` more things checked."""
        self.counts[what] = self.counts.get(what, 0) + n


def _next_level(hashes: list[bytes]) -> list[bytes]:
    """Nodes of height ``h + 8`` from the nodes of height ``h`` (full groups of 256 only)."""
    out = []
    for at in range(0, len(hashes) - tiles.TILE_WIDTH + 1, tiles.TILE_WIDTH):
        level = hashes[at : at + tiles.TILE_WIDTH]
        while len(level) > 1:
            level = [merkle.node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
        out.append(level[0])
    return out


def _check_level(client: TileClient, level: int, hashes: list[bytes], report: TilesReport) -> None:
    for index in range(0, (len(hashes) + tiles.TILE_WIDTH - 1) // tiles.TILE_WIDTH):
        want = hashes[index * tiles.TILE_WIDTH : (index + 1) * tiles.TILE_WIDTH]
        tile = tiles.TileID(level=level, index=index, width=len(want))
        try:
            data = client.get(tile.path)
        except NotFoundError:
            report.add("tile", tile.path, "missing")
            continue
        except LedgerError as exc:
            report.add("tile", tile.path, str(exc))
            continue
        report.count("tiles")
        if data != b"".join(want):
            report.add("tile", tile.path, "holds other hashes than the entries give")


def _entries(client: TileClient, size: int, report: TilesReport) -> list[bytes]:
    """Leaf hashes of every entry of the tree of ``size`` (entries checked on the way)."""
    hashes: list[bytes] = []
    last_ms = 0
    for bundle in range(0, (size + tiles.TILE_WIDTH - 1) // tiles.TILE_WIDTH):
        first = bundle * tiles.TILE_WIDTH
        width = tiles.tile_width(0, bundle, size)
        try:
            leaves = client.leaves(first, width, size)
        except LedgerError as exc:
            report.add("bundle", tiles.TileID(level=0, index=bundle, entries=True,
                                              width=width).path, str(exc))  # fmt: skip
            hashes.extend(bytes(32) for _ in range(width))
            continue
        for offset, leaf in enumerate(leaves):
            hashes.append(merkle.leaf_hash(leaf))
            try:
                entry = decode_leaf(first + offset, leaf)
            except LedgerError as exc:
                report.add("entry", first + offset, str(exc))
                continue
            if entry.timestamp_ms < last_ms:
                report.add("entry", first + offset, "receive time before the previous entry's")
            last_ms = entry.timestamp_ms
        report.count("entries", width)
    return hashes


def _root_at(leaf_hashes: list[bytes], size: int) -> bytes:
    return merkle.root(leaf_hashes[:size])


def _anchors(
    client: TileClient,
    verifiers: Sequence[Verifier],
    origin: str,
    leaf_hashes: list[bytes],
    tsa_roots: Mapping[str, Sequence[Any]],
    report: TilesReport,
) -> None:
    try:
        anchored = anchored_from_bucket(client, verifiers, origin)
    except LedgerError as exc:
        report.add("anchor", "anchors/latest", str(exc))
        return
    if anchored is None:
        return
    checkpoint, note, anchors = anchored
    if checkpoint.size > len(leaf_hashes):
        report.add("anchor", f"anchors/{checkpoint.size}", "beyond the signed checkpoint")
        return
    if _root_at(leaf_hashes, checkpoint.size) != checkpoint.root_hash:
        report.add("checkpoint", f"checkpoints/{checkpoint.size}", "root differs from the entries")
    body = Checkpoint.from_text(SignedNote.from_text(note).text).body_bytes()
    for anchor in anchors:
        roots = tsa_roots.get(anchor.tsa)
        if not roots:
            report.unchecked += 1
            continue
        try:
            verify_token(anchor.token, digest=imprint_for_checkpoint_body(body), roots=roots)
        except LedgerError as exc:
            report.add("anchor", f"anchors/{checkpoint.size} ({anchor.tsa})", str(exc))
            continue
        report.count("anchors")


def audit_tiles(
    client: TileClient,
    verifiers: Sequence[Verifier],
    *,
    origin: str | None = None,
    tsa_roots: Mapping[str, Sequence[Any]] | None = None,
) -> TilesReport:
    """Check the log at ``client``'s URLs (module docstring)."""
    started = time.perf_counter()
    report = TilesReport(url=client.base_url)
    try:
        note = client.checkpoint_note()
        verified = client.checkpoint(verifiers, origin=origin)
    except LedgerError as exc:
        report.add("checkpoint", "checkpoint", str(exc))
        report.seconds = time.perf_counter() - started
        return report
    checkpoint = verified.checkpoint
    report.size = checkpoint.size
    report.count("checkpoints")
    hashes = _entries(client, checkpoint.size, report)
    leaf_hashes = hashes
    level = 0
    while hashes:
        _check_level(client, level, hashes, report)
        hashes = _next_level(hashes)
        level += 1
    if checkpoint.size and _root_at(leaf_hashes, checkpoint.size) != checkpoint.root_hash:
        report.add("root", "checkpoint", "the entries give another root than the checkpoint's")
    try:
        stored = client.get(f"checkpoints/{checkpoint.size}").decode("utf-8", "replace")
        if SignedNote.from_text(stored).text != SignedNote.from_text(note).text:
            report.add("checkpoint", f"checkpoints/{checkpoint.size}", "another body")
        else:
            report.count("checkpoints")
    except NotFoundError:
        pass  # not a bucket the publisher wrote (the log's endpoint, a mirror folder)
    except LedgerError as exc:
        report.add("checkpoint", f"checkpoints/{checkpoint.size}", str(exc))
    _anchors(client, verifiers, checkpoint.origin, leaf_hashes, tsa_roots or {}, report)
    report.seconds = time.perf_counter() - started
    return report
