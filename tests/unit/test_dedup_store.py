"""The derived dedup table in a real RocksDB store (``ledger.store.dedup``): the log answers
exactly what the dict-backed reference store answers (the semantics of the ``digests`` family
it replaced) for random packed and typed batches with duplicates inside and across requests,
across growths and reopenings; a table deleted, truncated, garbled, torn, of another log or
ahead of the tree is rebuilt and answers stay right; a secondary follows the writer's table;
a tiles-2 dir loses its ``digests`` family; chosen digests do not lengthen probe chains."""

from __future__ import annotations

import hashlib
import random
import shutil
from pathlib import Path

import pytest

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.types import AppendItem
from ledger.log.facade import Log
from ledger.store.contract import MemoryStore

rocksdict = pytest.importorskip("rocksdict")

from ledger.store import dedup  # noqa: E402
from ledger.store.rocks import LAYOUT, RocksStore  # noqa: E402

ORIGIN = "dedup.test/table"


def digest(n: int) -> bytes:
    return hashlib.sha256(f"dedup-{n}".encode()).digest()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        self.now += 3
        return self.now


def log_over(store: RocksStore | MemoryStore, clock: Clock, signer: Ed25519Signer) -> Log:
    return Log(store=store, signer=signer, origin=ORIGIN, clock_ms=clock)


def random_batches(rng: random.Random, count: int, pool: int) -> list[list[int]]:
    """Batches drawn from a pool, so digests repeat inside and across batches."""
    return [[rng.randrange(pool) for _ in range(rng.choice([1, 3, 40, 400]))] for _ in range(count)]


def test_answers_match_the_reference_store_across_growth_and_reopening(tmp_path: Path) -> None:
    rng = random.Random(23)
    signer = Ed25519Signer.generate(ORIGIN)
    ours_clock, ref_clock = Clock(), Clock()
    reference = log_over(MemoryStore(), ref_clock, signer)
    store = RocksStore(tmp_path / "db")
    ours = log_over(store, ours_clock, signer)
    try:
        for round_ in range(3):
            for n, batch in enumerate(random_batches(rng, 25, 6_000)):
                digests = [digest(k) for k in batch]
                if n % 2:
                    assert ours.append([AppendItem(d) for d in digests]) == reference.append(
                        [AppendItem(d) for d in digests]
                    )
                else:
                    assert ours.append_packed(b"".join(digests)) == reference.append_packed(
                        b"".join(digests)
                    )
            store.close()  # reopened: the table from its file
            store = RocksStore(tmp_path / "db")
            ours = log_over(store, ours_clock, signer)
            assert store.open_dedup() == "", round_
        assert ours.size == reference.size and ours.size > 2_048  # the table grew
        everything = [digest(k) for k in range(6_100)]
        assert store.find_digests(everything) == reference._store.find_digests(everything)
        assert (tmp_path / "db" / dedup.FILE).stat().st_size > dedup.HEADER + 12 * 4096
    finally:
        store.close()


def fill(path: Path, count: int, start: int = 0) -> None:
    store = RocksStore(path)
    try:
        log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        log.append_packed(b"".join(digest(k) for k in range(start, start + count)))
    finally:
        store.close()


def reopened_answers(path: Path, count: int) -> tuple[list[int | None], str]:
    store = RocksStore(path)
    try:
        note = store.open_dedup()
        return store.find_digests([digest(k) for k in range(count + 5)]), note
    finally:
        store.close()


def truncate(table: Path) -> None:
    with table.open("r+b") as f:
        f.truncate(table.stat().st_size - 12)


def garble_headers(table: Path) -> None:
    raw = bytearray(table.read_bytes())
    raw[20] ^= 0xFF
    raw[dedup.COPY + 20] ^= 0xFF
    table.write_bytes(bytes(raw))


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda t: t.unlink(), "there is none"),
        (truncate, "bytes, its header wants"),
        (garble_headers, "both header copies are damaged"),
        (lambda t: t.write_bytes(b"\0" * 100), "both header copies are damaged"),
    ],
)
def test_a_damaged_table_is_rebuilt_and_answers_stay_right(
    tmp_path: Path, damage: object, why: str
) -> None:
    fill(tmp_path / "db", 3_000)
    assert callable(damage)
    damage(tmp_path / "db" / dedup.FILE)
    answers, note = reopened_answers(tmp_path / "db", 3_000)
    assert answers == [*range(3_000), *[None] * 5]
    assert "rebuilt from the entry bundles" in note and why in note and "3,000 entries" in note


def test_one_torn_header_copy_is_not_a_rebuild(tmp_path: Path) -> None:
    fill(tmp_path / "db", 500)
    fill(tmp_path / "db", 500, start=500)  # the header written again: both copies used
    table = tmp_path / "db" / dedup.FILE
    raw = bytearray(table.read_bytes())
    newer = max((0, dedup.COPY), key=lambda at: int.from_bytes(raw[at + 16 : at + 24], "little"))
    raw[newer + 30] ^= 0x10  # the newer copy torn: the older one counts, entries since replayed
    table.write_bytes(bytes(raw))
    answers, note = reopened_answers(tmp_path / "db", 1_000)
    assert answers == [*range(1_000), *[None] * 5] and note == ""


def test_a_table_of_another_log_or_ahead_of_the_tree_is_rebuilt(tmp_path: Path) -> None:
    fill(tmp_path / "a", 700)
    fill(tmp_path / "b", 700, start=10_000)  # same size, other entries
    shutil.copy(tmp_path / "b" / dedup.FILE, tmp_path / "a" / dedup.FILE)
    answers, note = reopened_answers(tmp_path / "a", 700)
    assert answers == [*range(700), *[None] * 5] and "is not this tree's" in note
    backup = tmp_path / "backup"
    shutil.copytree(tmp_path / "a", backup)  # the tree at 700 ...
    fill(tmp_path / "a", 300, start=700)
    shutil.copy(tmp_path / "a" / dedup.FILE, backup / dedup.FILE)  # ... with a table at 1,000
    answers, note = reopened_answers(backup, 1_000)
    assert answers == [*range(700), *[None] * 305] and "covers 1,000 entries" in note


def test_a_crash_before_the_header_is_replayed_from_the_bundles(tmp_path: Path) -> None:
    """Entries committed after the last header (the writer died before closing) are inserted
    again from their bundles on open; inserting what the pages already hold writes nothing."""
    fill(tmp_path / "db", 100)
    store = RocksStore(tmp_path / "db")
    log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
    log.append_packed(b"".join(digest(k) for k in range(100, 900)))
    table = store._table
    assert table is not None and table.header.covered == 100
    stale = (tmp_path / "db" / dedup.FILE).read_bytes()
    store.close()
    (tmp_path / "db" / dedup.FILE).write_bytes(stale[: dedup.HEADER] + bytes(len(stale) - 8192))
    answers, note = reopened_answers(tmp_path / "db", 900)  # slots lost, header at 100
    assert answers[:100] == [None] * 100  # the header's promise was broken on purpose here ...
    assert answers[100:] == [*range(100, 900), *[None] * 5] and note == ""  # ... the rest replayed


def test_a_secondary_follows_the_writers_table_through_growth(tmp_path: Path) -> None:
    writer = RocksStore(tmp_path / "db")
    try:
        log = Log(store=writer, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        log.append_packed(b"".join(digest(k) for k in range(1_000)))
        reader = RocksStore.secondary(tmp_path / "db", tmp_path / "reader")
        try:
            assert reader.find_digests([digest(5), digest(1_500)]) == [5, None]
            log.append_packed(b"".join(digest(k) for k in range(1_000, 3_000)))  # grows
            assert reader.find_digests([digest(1_500)]) == [None]  # not caught up yet
            reader.catch_up()
            assert reader.find_digests([digest(5), digest(1_500), digest(2_999)]) == [
                5,
                1_500,
                2_999,
            ]
        finally:
            reader.close()
    finally:
        writer.close()


def test_a_tiles2_dir_loses_its_digests_family_and_answers_the_same(tmp_path: Path) -> None:
    fill(tmp_path / "db", 600)
    (tmp_path / "db" / dedup.FILE).unlink()
    opts = rocksdict.Options(raw_mode=True)
    opts.create_missing_column_families(True)
    families = {
        "tree": rocksdict.Options(raw_mode=True),
        "digests": rocksdict.Options(raw_mode=True),
    }
    db = rocksdict.Rdict(str(tmp_path / "db"), opts, column_families=families)
    old = db.get_column_family("digests")
    for k in range(600):  # as tiles-2 wrote them
        old[digest(k)] = k.to_bytes(6, "big")
    db[b"V"] = b"tiles-2"
    del old
    db.close()
    answers, note = reopened_answers(tmp_path / "db", 600)
    assert answers == [*range(600), *[None] * 5] and "there is none" in note
    assert rocksdict.Rdict.list_cf(str(tmp_path / "db"), opts) == ["default", "tree"]
    db = rocksdict.Rdict(str(tmp_path / "db"), opts, column_families={"tree": opts})
    assert db[b"V"] == LAYOUT == b"tiles-4"  # through tiles-3 (``convert_tiles3``)
    db.close()


def displacements(table: Path) -> list[int]:
    """How far each occupied slot sits from its chain's start (its fingerprint mod slots)."""
    slots = table.read_bytes()[dedup.HEADER :]
    count = len(slots) // 12
    out = []
    for at in range(count):
        slot = slots[12 * at : 12 * at + 12]
        if any(slot[6:]):
            home = int.from_bytes(slot[:6], "little") % count
            out.append((at - home) % count)
    return out


def test_digests_sharing_a_prefix_do_not_lengthen_probe_chains(tmp_path: Path) -> None:
    """Clients choose digests: 4,000 that differ only in their last 2 bytes (as if chosen to
    collide in an unkeyed table indexed by a prefix) spread like random ones, since slots are
    keyed fingerprints. The same measure on a table whose fingerprints are narrowed to nothing
    (what an attacker who could predict them would get) shows what it guards against."""
    chosen = [bytes(30) + n.to_bytes(2, "big") for n in range(4_000)]
    store = RocksStore(tmp_path / "db")
    try:
        log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        log.append_packed(b"".join(chosen))
        assert store.find_digests(chosen[::400]) == list(range(0, 4_000, 400))
    finally:
        store.close()
    spread = displacements(tmp_path / "db" / dedup.FILE)
    assert len(spread) == 4_000 and max(spread) < 64 and sum(spread) / len(spread) < 2
    piled = dedup.DedupTable.build(tmp_path / "piled", 4_000, [(0, b"".join(chosen))], mask=0)
    try:
        piled.flush(4_000, bytes(32))
    finally:
        piled.close()
    assert max(displacements(tmp_path / "piled.new")) == 3_999


def test_slots_written_after_the_header_count_when_the_table_grows(tmp_path: Path) -> None:
    """Crashes after inserts whose pages reached the disk but not the header: the slots are
    there, their replay writes nothing, and the table must still count them (it did not: after
    a few such crashes it filled up and refused the next insert)."""
    path = tmp_path / "db"
    fill(path, 10)
    for cycle in range(6):  # 6,000 entries in a table of 4,096 slots unless it grows
        store = RocksStore(path)
        log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN)
        first = 10 + 1_000 * cycle
        log.append_packed(b"".join(digest(k) for k in range(first, first + 1_000)))
        on_disk = (path / dedup.FILE).read_bytes()  # the slots, with the header of before
        store.close()
        (path / dedup.FILE).write_bytes(on_disk)  # ... as a crash before close leaves it
    answers, note = reopened_answers(path, 6_010)
    assert answers == [*range(6_010), *[None] * 5] and note == ""


def test_the_insert_after_a_look_up_reuses_its_fingerprints_only_when_they_fit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group commit looks its digests up, then inserts the new ones: the fingerprints of the
    look-up serve the insert of the same bytes (same key and mask), and only then."""
    from ledger.core import accel

    table = dedup.DedupTable.build(tmp_path / dedup.FILE, 0, [])
    taken: list[int] = []
    real = accel.dedup_fingerprints

    def counting(key: bytes, mask: int, digests: bytes) -> bytes:
        taken.append(len(digests) // 32)
        return real(key, mask, digests)

    monkeypatch.setattr(accel, "dedup_fingerprints", counting)
    first = b"".join(digest(n) for n in range(40))
    assert table.find(first) == []
    table.insert(0, bytes(first))  # equal bytes, another object: reused
    assert taken == [40]
    second = b"".join(digest(n) for n in range(40, 50))
    table.find(second)
    table.insert(40, second[:-32])  # not the same digests (a duplicate left out): taken anew
    assert taken == [40, 10, 9]
    table.find(second[-32:])
    table.mask = 0xFF  # another mask: the look-up's fingerprints do not fit
    table.insert(49, second[-32:])
    assert taken == [40, 10, 9, 1, 1]
    table.mask = dedup.FP_MASK
    table.insert(49, second[-32:])  # no look-up before it: taken
    assert taken == [40, 10, 9, 1, 1, 1]
    found = table.find(first + second[:-32])
    assert found == [x for k in range(49) for x in (k, k)]
    table.discard()
