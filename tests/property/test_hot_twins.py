"""The compiled core (ledger/core/_hot.c) and its pure twin (ledger/core/hot.py) give identical
leaf hashes, compact ranges and roots, tile and bundle bytes and sequencing results, over
10,000 small random examples; and the packed append path gives what the typed one gives.

`make test` runs this module on the compiled build and again under ``LEDGER_PURE=1``, but for
the two comparisons that call both modules by name (the same code in both runs: the Makefile's
``PURE_SAME``); where the compiled core is not built (a pure install) the twin comparisons skip,
naming why.
"""

from __future__ import annotations

import hashlib
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core import accel, hot, merkle
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.merkle import CompactRange
from ledger.core.tile_layout import TileWriter
from ledger.core.tiles import frame_entry
from ledger.core.types import AppendItem, AppendResult, leaf_prefix, leaf_suffix
from ledger.log.facade import Log
from ledger.log.integrator import Integrator
from ledger.log.sequencer import Sequencer
from ledger.store.contract import MemoryStore, TreeState

pytestmark = pytest.mark.slow


def compiled() -> ModuleType:
    try:
        from ledger.core import _hot
    except ImportError as exc:
        pytest.skip(f"the compiled core is not built ({exc}): nothing to compare the twin with")
    return _hot


def digest(n: int) -> bytes:
    return hashlib.sha256(n.to_bytes(4, "big")).digest()


# Small pools of digests, so that duplicates inside a batch and against the log are common.
pools = st.lists(st.integers(0, 40), min_size=0, max_size=24)
sizes = st.one_of(st.integers(0, 600), st.integers(0, 2**40))


@settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    batch=pools,
    known=st.sets(st.integers(0, 40), max_size=8),
    now=st.integers(0, 2**63 - 1),
    size=sizes,
    stack_seed=st.binary(min_size=1, max_size=4),
)
def test_compiled_and_pure_agree(
    batch: list[int], known: set[int], now: int, size: int, stack_seed: bytes
) -> None:
    native = compiled()
    digests = b"".join(digest(n) for n in batch)
    flags = bytes(n in known for n in batch)
    prefix = leaf_prefix(now)
    plain = leaf_suffix(b"")
    framed_prefix = (len(prefix) + 32 + len(plain)).to_bytes(2, "big") + prefix
    args = (digests, flags, b"\x00" + prefix, framed_prefix, plain)
    sequenced = hot.sequence_plain(*args)
    assert native.sequence_plain(*args) == sequenced
    # the leaf hashes are RFC 6962 leaf hashes of the v1 leaves
    new, hashes, framed, _ = sequenced
    leaves = [prefix + new[i : i + 32] + plain for i in range(0, len(new), 32)]
    assert hashes == b"".join(merkle.leaf_hash(x) for x in leaves)
    assert framed == b"".join(frame_entry(x) for x in leaves)

    stack = b"".join(
        hashlib.sha256(stack_seed + bytes([k])).digest() for k in range(size.bit_count())
    )
    extended = hot.compact_extend(size, stack, hashes)
    assert native.compact_extend(size, stack, hashes) == extended
    assert native.compact_root(stack) == hot.compact_root(stack)
    assert native.compact_root(extended[0]) == hot.compact_root(extended[0])
    assert native.split_hashes(digests) == hot.split_hashes(digests)
    assert native.present([None if n in known else n for n in batch]) == hot.present(
        [None if n in known else n for n in batch]
    )
    first = size % (2**47)
    assert native.index_values(first, len(batch), 6) == hot.index_values(first, len(batch), 6)


def test_bad_buffers_are_refused_alike() -> None:
    native = compiled()
    calls: list[tuple[str, tuple[object, ...]]] = [
        ("sequence_plain", (b"x" * 33, b"\x00", b"", b"", b"")),
        ("sequence_plain", (b"x" * 32, b"", b"", b"", b"")),
        ("compact_extend", (3, b"x" * 32, b"")),
        ("compact_extend", (0, b"", b"x" * 31)),
        ("compact_root", (b"x" * 31,)),
        ("split_hashes", (b"x" * 31,)),
        ("index_values", (2**48 - 1, 2, 6)),
        ("bundle_leaf_hashes", (b"\x00",)),
        ("bundle_leaf_hashes", (b"\x00\x03ab",)),
        ("bundle_leaf_hashes", (b"\x00\x01a\x00",)),
    ]
    for module in (hot, native):
        for name, args in calls:
            with pytest.raises(ValueError):
                getattr(module, name)(*args)


@settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    entries=st.lists(st.binary(max_size=300), max_size=40),
    cut=st.integers(0, 50),
)
def test_bundle_leaf_hashes_agree(entries: list[bytes], cut: int) -> None:
    """A bundle's row-0 hashes: compiled and pure alike, each the RFC 6962 leaf hash of its
    entry; a bundle cut short anywhere is refused by both with the same message."""
    native = compiled()
    bundle = b"".join(frame_entry(e) for e in entries)
    want = b"".join(merkle.leaf_hash(e) for e in entries)
    assert hot.bundle_leaf_hashes(bundle) == want
    assert native.bundle_leaf_hashes(bundle) == want
    short = bundle[: max(0, len(bundle) - cut)]
    try:
        pure: bytes | str = hot.bundle_leaf_hashes(short)
    except ValueError as exc:
        pure = str(exc)
    try:
        compiled_answer: bytes | str = native.bundle_leaf_hashes(short)
    except ValueError as exc:
        compiled_answer = str(exc)
    assert compiled_answer == pure


# --- tiles and bundles: the packed plan against the reference plan, on the selected core -----

commits = st.lists(st.integers(1, 700), min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(commits)
def test_packed_tile_plan_writes_what_the_reference_plan_writes(counts: list[int]) -> None:
    values: dict[bytes, bytes] = {}

    def lookup(keys: list[bytes]) -> list[bytes | None]:
        return [values.get(k) for k in keys]

    reference = packed = TileWriter.load(0, lookup)
    ref_range, packed_range = CompactRange(), CompactRange()
    size = 0
    for count in counts:
        prefix, plain = leaf_prefix(size), leaf_suffix(b"")
        leaves = [prefix + digest(size + i) + plain for i in range(count)]
        hashes = [merkle.leaf_hash(x) for x in leaves]
        nodes = ref_range.extend(hashes, with_leaves=False)
        want, reference = reference.plan(size, [frame_entry(x) for x in leaves], nodes)
        rows = packed_range.extend_packed(b"".join(hashes))
        framed = b"".join(frame_entry(x) for x in leaves)
        got, packed = packed.plan_packed(size, framed, len(framed) // count, rows)
        assert got == want
        assert packed_range == ref_range and packed_range.root() == ref_range.root()
        # a writer reloaded from the stored values continues exactly as the running one
        values.update(got)
        size += count
        reloaded = TileWriter.load(size, lookup)
        assert reloaded.plan(size, [], [])[0] == packed.plan(size, [], [])[0]


# --- sequencing: the packed append against the typed path, on the selected core -------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        self.now += 7
        return self.now


class TypedPath:
    """The reference: ``Sequencer.sequence``, ``Integrator.integrate`` and ``Store.commit``
    (an object per entry and node), as ``Log.append`` ran them before the packed path."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.sequencer = Sequencer(store=store, clock_ms=Clock(), next_index=0, last_timestamp_ms=0)
        self.integrator = Integrator(store.load_state().compact)

    def append(self, items: list[AppendItem]) -> list[AppendResult]:
        sequenced = self.sequencer.sequence(items)
        if sequenced.entries:
            nodes, compact = self.integrator.integrate(sequenced.leaf_hashes)
            state = TreeState(compact=compact, last_timestamp_ms=sequenced.last_timestamp_ms)
            self.store.commit(sequenced.batch(nodes, state))
            self.sequencer.adopt(sequenced)
            self.integrator.adopt(compact)
        return sequenced.results


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(0, 60), min_size=1, max_size=40), min_size=1, max_size=6))
def test_packed_append_gives_the_typed_results_and_stores_the_same_bytes(
    requests: list[list[int]],
) -> None:
    signer = Ed25519Signer.generate("example.org/log")
    stores = MemoryStore(), MemoryStore(), MemoryStore()
    reference = TypedPath(stores[0])
    packed = Log(store=stores[1], signer=signer, origin="example.org/log", clock_ms=Clock())
    routed = Log(store=stores[2], signer=signer, origin="example.org/log", clock_ms=Clock())
    for request in requests:
        items = [AppendItem(digest(n)) for n in request]
        want = reference.append(items)
        got = packed.append_digests(b"".join(digest(n) for n in request))
        assert got.count == len(request)
        assert got.results() == want
        assert routed.append(items) == want  # a typed batch without metadata goes packed
    for store in stores[1:]:
        assert store._values == stores[0]._values
        assert store._digests == stores[0]._digests
        assert store.load_state() == stores[0].load_state()


def test_the_selected_core_is_named() -> None:
    assert accel.CORE in ("native", "pure")
    assert (accel.native_error is None) == (accel.CORE == "native")
