"""The dedup table's compiled functions (ledger/core/_hot.c) and their pure twins
(ledger/core/hot.py) write identical table bytes and give identical answers for random
sequences of inserts (replays of the same entries included), look-ups and growths, with
fingerprints narrowed by a test mask so that long chains and full-fingerprint collisions are
common; and both agree with a plain dict of what was inserted.

`make test` runs this module on the compiled build and again under ``LEDGER_PURE=1``, but for
the three comparisons that call both modules by name (the same code in both runs: the
Makefile's ``PURE_SAME``); where the compiled core is not built the comparisons skip, naming
why.
"""

from __future__ import annotations

import hashlib
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core import hot

pytestmark = pytest.mark.slow

FULL = (1 << 48) - 1


def compiled() -> ModuleType:
    try:
        from ledger.core import _hot
    except ImportError as exc:
        pytest.skip(f"the compiled core is not built ({exc}): nothing to compare the twin with")
    return _hot


def digest(n: int) -> bytes:
    return hashlib.sha256(n.to_bytes(4, "big")).digest()


steps = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), st.lists(st.integers(0, 60), max_size=12)),
        st.tuples(st.just("replay"), st.integers(0, 200)),
        st.tuples(st.just("find"), st.lists(st.integers(0, 80), max_size=12)),
        st.tuples(st.just("grow"), st.integers(1, 2)),
    ),
    max_size=12,
)


@settings(max_examples=3_000, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    steps=steps,
    key=st.binary(min_size=16, max_size=16),
    mask=st.sampled_from([0, 1, 7, 0xFF, FULL]),
    bits=st.integers(4, 6),
)
def test_compiled_and_pure_tables_are_identical(
    steps: list[tuple[str, object]], key: bytes, mask: int, bits: int
) -> None:
    native = compiled()
    tables = {m: bytearray(12 << bits) for m in (hot, native)}
    inserted: list[bytes] = []  # entry i's digest, as the log would have them
    for op, arg in steps:
        if op == "insert":
            assert isinstance(arg, list)
            new = [digest(n) for n in arg if digest(n) not in inserted]
            new = list(dict.fromkeys(new))
            if 2 * (len(inserted) + len(new)) > len(tables[hot]) // 12:
                continue  # the store grows first; here: skip
            written = {
                m: m.dedup_insert(t, key, mask, b"".join(new), len(inserted))
                for m, t in tables.items()
            }
            assert written[hot] == written[native] == len(new)
            inserted += new
        elif op == "replay":  # entries inserted again (after a crash): nothing written
            assert isinstance(arg, int)
            start = min(arg, len(inserted))
            again = b"".join(inserted[start:])
            assert {m.dedup_insert(t, key, mask, again, start) for m, t in tables.items()} == {0}
        elif op == "find":
            assert isinstance(arg, list)
            asked = b"".join(digest(n) for n in arg)
            answers = [m.dedup_find(t, key, mask, asked) for m, t in tables.items()]
            assert answers[0] == answers[1]
            pairs = set(zip(answers[0][0::2], answers[0][1::2], strict=True))
            for position, n in enumerate(arg):  # every inserted digest is among its candidates
                if digest(n) in inserted:
                    assert (position, inserted.index(digest(n))) in pairs
            if mask == FULL:  # 48-bit fingerprints of 61 digests: no false candidates
                assert all(inserted[i] == digest(arg[p]) for p, i in pairs)
        else:
            assert isinstance(arg, int)
            grown = {m: bytearray(len(t) << arg) for m, t in tables.items()}
            moved = {m: m.dedup_rehash(tables[m], grown[m]) for m in tables}
            assert moved[hot] == moved[native] == len(inserted)
            tables = grown
        assert tables[hot] == tables[native]
        assert hot.dedup_count(tables[hot]) == native.dedup_count(tables[native]) == len(inserted)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(entries=st.lists(st.binary(min_size=9, max_size=80), max_size=20))
def test_bundle_digests_twins(entries: list[bytes]) -> None:
    native = compiled()
    bundle = b"".join(len(e).to_bytes(2, "big") + e for e in entries)
    for cut in (len(bundle), max(len(bundle) - 1, 0)):
        outcomes = []
        for m in (hot, native):
            try:
                outcomes.append(m.bundle_digests(bundle[:cut]))
            except ValueError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1]
    if all(len(e) >= 41 for e in entries):
        assert hot.bundle_digests(bundle) == b"".join(e[9:41] for e in entries)


@pytest.mark.parametrize("module", ["pure", "compiled"])
def test_bad_tables_and_arguments_are_refused(module: str) -> None:
    m = hot if module == "pure" else compiled()
    with pytest.raises(ValueError, match="power-of-two"):
        m.dedup_find(bytes(12 * 3), bytes(16), FULL, digest(1))
    with pytest.raises(ValueError, match="key not 16 bytes"):
        m.dedup_find(bytes(12 * 4), bytes(15), FULL, digest(1))
    with pytest.raises(ValueError, match="over 48 bits"):
        m.dedup_insert(bytearray(12 * 4), bytes(16), FULL, digest(1), (1 << 48) - 1)
    full = bytearray(12 * 4)
    m.dedup_insert(full, bytes(16), FULL, b"".join(digest(n) for n in range(4)), 0)
    with pytest.raises(ValueError, match="full"):
        m.dedup_insert(full, bytes(16), FULL, digest(9), 4)
    assert len(m.dedup_find(full, bytes(16), FULL, digest(9))) == 0  # a full table still ends


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    batches=st.lists(st.lists(st.integers(0, 400), min_size=1, max_size=70), max_size=5),
    asked=st.lists(st.integers(0, 500), max_size=70),
    key=st.binary(min_size=16, max_size=16),
    mask=st.sampled_from([0, 0xFF, FULL]),
    bits=st.integers(5, 9),
)
def test_batches_longer_than_the_prefetch_window_are_identical(
    batches: list[list[int]], asked: list[int], key: bytes, mask: int, bits: int
) -> None:
    """The compiled loops take fingerprints (and prefetch slots) 16 digests ahead: batches
    that cross those windows, and a table that fills up in the middle of one, give the same
    bytes, counts, answers and errors as the twin's one digest at a time."""
    native = compiled()
    tables = {m: bytearray(12 << bits) for m in (hot, native)}
    # the two-step form (fingerprints once, then insert / find with them) on its own tables
    stepped = {m: bytearray(12 << bits) for m in (hot, native)}
    first = 0
    for batch in batches:
        digests = b"".join(digest(n) for n in dict.fromkeys(batch))
        fps = {m: m.dedup_fingerprints(key, mask, digests) for m in (hot, native)}
        assert fps[hot] == fps[native]
        assert len(fps[hot]) == 8 * (len(digests) // 32)
        outcomes: dict[tuple[ModuleType, str], int | str] = {}
        for m in (hot, native):
            for form in ("digests", "fps"):
                try:
                    if form == "digests":
                        outcomes[m, form] = m.dedup_insert(tables[m], key, mask, digests, first)
                    else:
                        outcomes[m, form] = m.dedup_insert_fps(stepped[m], fps[m], first)
                except ValueError as exc:
                    outcomes[m, form] = str(exc)
        assert len(set(outcomes.values())) == 1
        assert tables[hot] == tables[native] == stepped[hot] == stepped[native]
        first += len(digests) // 32
    query = b"".join(digest(n) for n in asked)
    answers = [m.dedup_find(tables[m], key, mask, query) for m in (hot, native)]
    fps_of_query = hot.dedup_fingerprints(key, mask, query)
    answers += [m.dedup_find_fps(stepped[m], fps_of_query) for m in (hot, native)]
    assert all(a == answers[0] for a in answers)


@pytest.mark.parametrize("module", ["pure", "compiled"])
def test_bad_fingerprint_arguments_are_refused(module: str) -> None:
    m = hot if module == "pure" else compiled()
    table = bytearray(12 * 8)
    with pytest.raises(ValueError, match="N x 8"):
        m.dedup_insert_fps(table, bytes(7), 0)
    with pytest.raises(ValueError, match="N x 8"):
        m.dedup_find_fps(table, bytes(9))
    with pytest.raises(ValueError, match="power-of-two"):
        m.dedup_find_fps(bytes(12 * 3), bytes(8))
    over = (1 << 48).to_bytes(8, "little")
    with pytest.raises(ValueError, match="fingerprint over 48 bits"):
        m.dedup_insert_fps(table, over, 0)
    with pytest.raises(ValueError, match="fingerprint over 48 bits"):
        m.dedup_find_fps(table, over)
    with pytest.raises(ValueError, match="index over 48 bits"):
        m.dedup_insert_fps(table, bytes(8), (1 << 48) - 1)
    with pytest.raises(ValueError, match="key not 16 bytes"):
        m.dedup_fingerprints(bytes(15), FULL, digest(1))
    assert table == bytearray(12 * 8)  # nothing written by a refused call
    assert m.dedup_fingerprints(bytes(16), FULL, b"") == b""
