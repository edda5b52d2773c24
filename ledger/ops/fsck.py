"""``ledger fsck``: check every byte of a stopped log's data against what it must be.

Recomputes the tree from the stored entry bundles (RFC 6962 §2.1) in one sequential pass and
rebuilds the tile layout from them (``ledger.core.tile_layout``), comparing every stored bundle and
tile value once it can no longer change (so memory stays the right edge); checks the bundles
are contiguous, each leaf parses (v1), timestamps never decrease and the dedup table
(``ledger.store.dedup``, derived from the bundles; opening it for the check brings it up to
date or rebuilds it, as the log's open would, and a rebuild is a note) answers each entry's
digest with its index (one look-up per bundle; a slot damaged since it was written is named);
checks the tree state (compact range, last time); checks every checkpoint (C2SP signature by
the bound key or an earlier one, origin, size, stored root == note root == recomputed root) and
every anchor (RFC 3161 token over the checkpoint body, genTime, chain to the TSA's roots where
known); and checks the data dir's binding (origin, key file). RocksDB is opened with paranoid
checks and absolute WAL consistency, and every read verifies block checksums, so a flipped byte
in a table file, the WAL or the manifest is reported too. Each problem names what and where.

A damaged block ends a RocksDB iteration as if the keys ended there; ``RocksStore`` checks each
iterator's status and raises ``DataLossError``, and every scan here reports it as a problem
naming the table file and the key range the damage hides (the last key read before it, the
first read back from the end), then goes on after that range. The checkpoint the published
high-water mark names must be stored and the same. Anchors of a TSA with no configured roots
are counted in ``FsckReport.unchecked``: not a problem, but not OK either; ``ledger fsck`` exits
3 for them when nothing else is wrong (docs/operating.md "fsck").
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509

from ledger.core import merkle
from ledger.core.checkpoint import open_checkpoint
from ledger.core.errors import DataLossError, LedgerError
from ledger.core.note import Ed25519Verifier
from ledger.core.tile_layout import TileWriter, is_full, is_value_key
from ledger.core.tiles import TILE_WIDTH, frame_entry, split_entry_bundle
from ledger.core.types import decode_leaf
from ledger.fileio.keys import load_signer
from ledger.log.anchoring import checkpoint_body
from ledger.log.highwater import HighWaterMark
from ledger.log.integrator import Integrator
from ledger.ops.binding import Binding, read_binding
from ledger.store.contract import TreeState
from ledger.store.rocks import EDGE, RocksStore, logical_key
from ledger.timestamp.rfc3161 import imprint_for_checkpoint_body, verify_token

__all__ = ["FsckReport", "Problem", "fsck"]

MAX_PROBLEMS = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One thing that is wrong: ``what`` (entry, node, dedup, state, checkpoint, anchor,
    binding, rocksdb) and ``where`` (index, key, size, file)."""

    what: str
    where: str
    detail: str

    def __str__(self) -> str:
        return f"{self.what} {self.where}: {self.detail}"


@dataclass(slots=True)
class FsckReport:
    """What fsck checked and found."""

    problems: list[Problem] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    unchecked: int = 0  # anchors of a TSA with no configured roots: not OK, not a problem
    damaged: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, what: str, where: object, detail: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(Problem(what=what, where=str(where), detail=detail))


class _Stop(Exception):
    """Too many problems to go on."""


_TABLE = re.compile(r"([^\s/]+\.(?:sst|log|ldb))\b")
_KIND = {b"B": "bundle", b"T": "tile", b"C": "checkpoint", b"A": "anchor"}


def _name_key(family: str, key: bytes | None) -> str:
    if key is None:
        return "the start"
    if family == "default" and key[:1] in (b"C", b"A") and len(key) >= 9:
        return f"{_KIND[key[:1]]} size {_u64(key[1:9])}"
    logical = _logical(family, key)
    if logical is not None:
        return _tree_where(logical)
    return f"key {key.hex()}"


def _logical(family: str, key: bytes) -> bytes | None:
    """The logical bundle or tile key (``core.tile_layout``) a stored key holds, or None."""
    if family == "tree":
        return logical_key(key)
    if family == "default" and key[:1] == EDGE and is_value_key(key[1:]):
        return key[1:]
    return None


def _kind_of(family: str, key: bytes) -> str:
    logical = _logical(family, key)
    return _KIND.get((key if logical is None else logical)[:1], "key")


def _scan(
    store: RocksStore, family: str, report: FsckReport, prefix: bytes = b""
) -> Iterator[tuple[bytes, bytes]]:
    """``store.scan_family`` from ``prefix`` that a damaged block cannot end quietly: the
    damage is a problem naming the table file and the key range it hides (the last key read
    before it, the first read back from the end), and the scan goes on after that range."""
    last: bytes | None = None
    start = prefix
    while True:
        try:
            for key, value in store.scan_family(family, start):
                if last is not None and key <= last:
                    continue
                last = key
                yield key, value
            return
        except DataLossError as exc:
            after = _report_damage(store, family, prefix, last, exc, report)
        if after is None or (last is not None and after <= last):
            return
        start = after


def _report_damage(
    store: RocksStore,
    family: str,
    prefix: bytes,
    last: bytes | None,
    exc: DataLossError,
    report: FsckReport,
) -> bytes | None:
    """Report the damage; the first key readable after it (None: none)."""
    after: bytes | None = None
    try:
        for key, _ in store.scan_family(family, prefix + b"\xff" * 48, backwards=True):
            if last is not None and key <= last:
                break
            after = key
    except DataLossError:
        pass
    found = _TABLE.search(str(exc))
    table = found.group(1) if found else "a table file"
    upper = "the end" if after is None else _name_key(family, after)
    where = f"{family} family, table file {table}"
    ident = f"{where} {last!r} {after!r}"
    if ident in report.damaged:
        return after
    report.damaged.add(ident)
    kind = _kind_of(family, after or last or prefix)
    detail = (
        f"damaged block: every {kind} after {_name_key(family, last)} and before {upper} "
        f"is unreadable ({exc})"
    )
    report.add(kind if kind != "key" else "rocksdb", where, detail)
    return after


def _u64(raw: bytes) -> int:
    return int.from_bytes(raw, "big")


class _TreeReplay:
    """Rebuilds the tile layout from the entries (``ledger.core.tile_layout.TileWriter``) and
    compares each bundle and tile value with the stored one once it can no longer change, so
    memory stays the right edge only; every stored tree key must be one of them."""

    def __init__(self, store: RocksStore, report: FsckReport) -> None:
        self._store = store
        self._report = report
        self._writer = TileWriter.load(0, lambda keys: [None] * len(keys))
        self._pending: dict[bytes, bytes] = {}
        self.expected_keys: set[bytes] = set()
        self.checked = 0

    def add(
        self, first: int, framed: list[bytes], nodes: list[tuple[merkle.NodeID, bytes]]
    ) -> None:
        writes, self._writer = self._writer.plan(first, framed, nodes)
        self._pending.update(writes)
        self._compare(first + len(framed), final=False)

    def finish(self, size: int) -> None:
        self._compare(size, final=True)
        for key, _ in _scan(self._store, "tree", self._report):
            logical = logical_key(key)
            if logical is None or logical not in self.expected_keys:
                self._report.add("tree", f"key {key.hex()}", "stored but not part of the tree")
            elif not is_full(logical, size):
                self._report.add("tree", _tree_where(logical), "stored as full, but it is not")
        for key, _ in _scan(self._store, "default", self._report, EDGE):
            if not key.startswith(EDGE):
                break
            logical = _logical("default", key)
            if logical is None or logical not in self.expected_keys:
                self._report.add("tree", f"key {key.hex()}", "stored but not part of the tree")
            elif is_full(logical, size):
                self._report.add("tree", _tree_where(logical), "full, but stored as the right edge")

    def _compare(self, size: int, *, final: bool) -> None:
        done = [k for k in self._pending if final or is_full(k, size)]
        if not done:
            return
        stored = self._store.tree_values(done)
        for key, value in zip(done, stored, strict=True):
            want = self._pending.pop(key)
            self.expected_keys.add(key)
            self.checked += 1
            if value != want:
                what = "bundle" if key[:1] == b"B" else "tile"
                found = "missing" if value is None else "differs from the recomputed value"
                self._report.add(what, _tree_where(key), found)


def _tree_where(key: bytes) -> str:
    if key[:1] == b"B":
        return f"entries {_u64(key[1:]) * TILE_WIDTH}.. (bundle {_u64(key[1:])})"
    return f"level {key[1]} index {_u64(key[2:])}"


def _bundles(store: RocksStore, report: FsckReport) -> Iterator[tuple[bytes, bytes]]:
    """(logical key, value) of every stored entry bundle in index order: the full ones (the
    tree family's keys sort by the last entry they cover), then the right edge."""
    for key, value in _scan(store, "tree", report):
        logical = logical_key(key)
        if logical is not None and logical[:1] == b"B":
            yield logical, value
    for key, value in _scan(store, "default", report, EDGE + b"B"):
        if not key.startswith(EDGE + b"B"):
            break
        yield key[1:], value


def _check_entries(store: RocksStore, state: TreeState, report: FsckReport) -> merkle.CompactRange:
    """Every entry bundle, in order: contiguous, full but the last, v1 leaves, times never
    decreasing; the tree recomputed from them and every tile compared; the tree state."""
    compact = merkle.CompactRange()
    replay = _TreeReplay(store, report)
    last_time = 0
    expected = 0
    dedup = _DedupCheck(store, report)
    for key, value in _bundles(store, report):
        if _u64(key[1:]) != expected // TILE_WIDTH or expected % TILE_WIDTH:
            report.add("bundle", f"key {key.hex()}", f"want the bundle of entry {expected}")
            raise _Stop
        try:
            leaves = split_entry_bundle(value)
        except LedgerError as exc:
            report.add("bundle", _tree_where(key), str(exc))
            raise _Stop from None
        hashes = []
        digests: list[tuple[int, bytes]] = []
        for offset, leaf in enumerate(leaves):
            index = expected + offset
            try:
                entry = decode_leaf(index, leaf)
            except LedgerError as exc:
                report.add("entry", f"index {index}", str(exc))
            else:
                if entry.timestamp_ms < last_time:
                    report.add("entry", f"index {index}", "timestamp before the previous entry's")
                last_time = entry.timestamp_ms
                digests.append((index, entry.record_digest))
            hashes.append(merkle.leaf_hash(leaf))
        dedup.check(digests)
        nodes, compact = Integrator(compact).integrate(hashes)
        replay.add(expected, [frame_entry(leaf) for leaf in leaves], nodes)
        expected += len(leaves)
    replay.finish(expected)
    report.counts["dedup"] = dedup.checked
    report.counts.update(entries=expected, tree_values=replay.checked)
    if expected != state.size:
        report.add("state", "key S", f"tree size {state.size}, but {expected} entries stored")
    elif compact != state.compact:
        report.add("state", "key S", "compact range differs from the recomputed tree")
    if state.last_timestamp_ms != last_time:
        report.add("state", "key S",
                   f"last time {state.last_timestamp_ms} != last entry's {last_time}")  # fmt: skip
    return compact


class _DedupCheck:
    """Each entry's digest looked up in the dedup table (unconfirmed candidates, so a slot
    that no longer answers is named rather than hidden by the confirming read)."""

    def __init__(self, store: RocksStore, report: FsckReport) -> None:
        self._store = store
        self._report = report
        self.checked = 0
        self._failed = False

    def check(self, digests: list[tuple[int, bytes]]) -> None:
        if self._failed or not digests:
            return
        try:
            found = self._store.dedup_candidates(b"".join(d for _, d in digests))
        except LedgerError as exc:
            self._failed = True
            self._report.add("dedup", "table", f"cannot be opened or rebuilt: {exc}")
            return
        if self._store.dedup_note and not self.checked:
            self._report.notes.append(self._store.dedup_note)
        answers = set(zip(found[0::2], found[1::2], strict=True))
        for position, (index, digest) in enumerate(digests):
            if (position, index) not in answers:
                self._report.add(
                    "dedup", f"index {index}",
                    f"the dedup table does not answer digest {digest.hex()} with this entry "
                    "(a damaged slot: delete the table file, LEDGER-DEDUP in the RocksDB "
                    "directory, and the log rebuilds it from the bundles when it opens)",
                )  # fmt: skip
        self.checked += len(digests)


_NAMING_BATCH = 1_000


def _check_checkpoints(
    store: RocksStore,
    root_at: Callable[[int], bytes],
    binding: Binding | None,
    size: int,
    report: FsckReport,
) -> list[tuple[int, str]]:
    keys = [Ed25519Verifier.from_key_string(k) for k in _binding_keys(binding)]
    found: list[tuple[int, str]] = []
    for key, value in _scan(store, "default", report, b"C"):
        if not key.startswith(b"C"):
            break
        where = f"size {_u64(key[1:])}" if len(key) == 9 else f"key {key.hex()}"
        try:
            cp_size = _u64(key[1:])
            note = value[32:].decode()
            checked = open_checkpoint(note, keys, origin=binding.origin if binding else None)
        except (LedgerError, UnicodeDecodeError, ValueError) as exc:
            report.add("checkpoint", where, f"does not verify: {exc}")
            continue
        body = checked.checkpoint
        if len(key) != 9 or body.size != cp_size:
            report.add("checkpoint", where, f"note says size {body.size}")
        elif cp_size > size:
            report.add("checkpoint", where, f"beyond the stored tree ({size})")
        elif value[:32] != body.root_hash or root_at(cp_size) != body.root_hash:
            report.add("checkpoint", where, "root differs from the recomputed tree's")
        else:
            found.append((cp_size, note))
    report.counts["checkpoints"] = len(found)
    return found


def _check_point_reads(store: RocksStore, family: str, report: FsckReport) -> None:
    """Every key a scan sees must also be found by a point read: a damaged bloom filter or
    index block would otherwise hide entries from proofs and duplicates from the dedup index."""
    batch: list[bytes] = []

    def flush() -> None:
        for key in store.unreadable_keys(family, batch):
            detail = "a scan finds it, a point read does not (filter or index block damaged)"
            report.add("rocksdb", f"{family} key {key.hex()}", detail)
        batch.clear()

    for key, _ in _scan(store, family, report):
        batch.append(key)
        if len(batch) == _NAMING_BATCH:
            flush()
    flush()


def _binding_keys(binding: Binding | None) -> list[str]:
    return [] if binding is None else [binding.verifier_key, *binding.previous_keys]


def _check_anchors(
    store: RocksStore,
    notes: dict[int, str],
    roots: dict[str, list[x509.Certificate]],
    report: FsckReport,
) -> None:
    count = 0
    for key, value in _scan(store, "default", report, b"A"):
        if not key.startswith(b"A"):
            break
        count += 1
        size, tsa = _u64(key[1:9]), key[9:].decode(errors="replace")
        where = f"size {size} tsa {tsa}"
        note = notes.get(size)
        if note is None:
            report.add("anchor", where, "no valid checkpoint of that size")
            continue
        if tsa not in roots:
            report.unchecked += 1
            report.notes.append(f"anchor {where}: no roots known for TSA {tsa!r}: NOT CHECKED")
            continue
        digest = imprint_for_checkpoint_body(checkpoint_body(note))
        try:
            verified = verify_token(value[8:], digest=digest, roots=roots[tsa])
        except LedgerError as exc:
            report.add("anchor", where, f"token does not verify: {exc}")
            continue
        if int(verified.gen_time.timestamp() * 1000) != _u64(value[:8]):
            report.add("anchor", where, "stored genTime differs from the token's")
    report.counts["anchors"] = count


def _check_binding(data_dir: Path, key_file: Path, report: FsckReport) -> Binding | None:
    try:
        binding = read_binding(data_dir)
    except LedgerError as exc:
        report.add("binding", str(data_dir / "log.json"), str(exc))
        return None
    if binding is None:
        report.add("binding", str(data_dir / "log.json"), "missing: the data dir is not bound")
        return None
    if key_file.exists():
        try:
            key = load_signer(key_file).verifier().key_string()
        except LedgerError as exc:
            report.add("binding", str(key_file), str(exc))
        else:
            if key != binding.verifier_key:
                report.add("binding", str(key_file), "the key file is not the bound key")
    else:
        report.notes.append(f"key file {key_file} absent: checked against the bound key only")
    return binding


def fsck(
    data_dir: Path,
    *,
    key_file: Path | None = None,
    tsa_roots: dict[str, list[x509.Certificate]] | None = None,
    mark_file: Path | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> FsckReport:
    """Check the log in ``data_dir`` (stopped: RocksDB allows one process); ``mark_file``:
    the published high-water mark, whose checkpoint must be stored."""
    report = FsckReport()
    start = clock()
    binding = _check_binding(data_dir, key_file or data_dir / "signer.key", report)
    try:
        store = RocksStore(data_dir / "db", create=False, paranoid=True, memtable_mb=4)
    except LedgerError as exc:
        if "lock file" in str(exc).lower():
            raise  # a running server holds it: not a problem of the data
        report.add("rocksdb", str(data_dir / "db"), str(exc))
        return report
    try:
        _run(store, binding, tsa_roots or {}, report, mark_file)
    except _Stop:
        pass
    except LedgerError as exc:
        report.add("rocksdb", str(data_dir / "db"), str(exc))
    except Exception as exc:  # rocksdict reports corruption as a plain Exception
        report.add("rocksdb", str(data_dir / "db"), f"read failed: {exc}")
    finally:
        store.close()
    report.seconds = clock() - start
    return report


def _check_mark(
    store: RocksStore, mark_file: Path, notes: dict[int, str], size: int, report: FsckReport
) -> None:
    """The checkpoint the high-water mark names (the newest ever published) must be stored,
    verified and the same: a damaged or missing newest checkpoint is not hidden by the others."""
    try:
        state = HighWaterMark(mark_file).read()
    except LedgerError as exc:
        report.add("mark", str(mark_file), str(exc))
        return
    if state is None:
        report.notes.append(f"high-water mark {mark_file} absent: nothing to compare")
        return
    published = state.checkpoint
    where = f"size {published.size}"
    if published.size > size:
        report.add("checkpoint", where,
                   f"named by the mark {mark_file}, beyond the stored tree ({size})")  # fmt: skip
    elif notes.get(published.size) is None:
        report.add("checkpoint", where,
                   f"named by the mark {mark_file}: not stored or does not verify")  # fmt: skip
    elif notes[published.size] != published.note:
        report.add("checkpoint", where, f"differs from the one the mark {mark_file} names")
    report.counts["mark_size"] = published.size


def _run(
    store: RocksStore,
    binding: Binding | None,
    roots: dict[str, list[x509.Certificate]],
    report: FsckReport,
    mark_file: Path | None,
) -> None:
    for name, error in store.probe_table_files():
        report.add("rocksdb", f"table file {name}", error)
    for family in RocksStore.FAMILIES:
        _check_point_reads(store, family, report)
    state = store.load_state()
    _check_entries(store, state, report)
    size = state.size

    def root_at(n: int) -> bytes:
        if n == 0:
            return merkle.EMPTY_ROOT
        node = merkle.subtree_node(0, n)
        return merkle.fold_proof_nodes([node], store.get_nodes)[0]

    found = _check_checkpoints(store, root_at, binding, size, report)
    if mark_file is not None:
        _check_mark(store, mark_file, dict(found), size, report)
    _check_anchors(store, dict(found), roots, report)
    for key, _ in _scan(store, "default", report):
        if key[:1] not in (b"A", b"C", b"S", b"V", EDGE):  # right-edge keys: ``_TreeReplay``
            report.add("rocksdb", f"key {key.hex()}", "unknown key in the default family")
