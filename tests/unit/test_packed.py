"""The packed-append shape: checks on the buffer, typed results packed and expanded back, and a
group commit's result split per request, against the typed log on the same store kind."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import InvalidArgumentError
from ledger.core.packed import check_packed, to_results
from ledger.core.types import AppendItem
from ledger.log.facade import Log
from ledger.log.packed import pack_results, split
from ledger.store.contract import MemoryStore

ORIGIN = "ledger.test/packed-unit"
SIGNER = Ed25519Signer.generate(ORIGIN)


def digest(i: int) -> bytes:
    return hashlib.sha256(f"p{i}".encode()).digest()


def log_at(now: int = 5_000) -> Log:
    return Log(store=MemoryStore(), signer=SIGNER, origin=ORIGIN, clock_ms=lambda: now)


@pytest.mark.parametrize(
    ("size", "message"),
    [(0, "empty"), (31, "31 bytes, not a multiple of 32"), (33 * 32 + 1, "not a multiple"),
     (11 * 32, "11 digests in one request, max 10")],
)  # fmt: skip
def test_check_packed_refuses_bad_buffers(size: int, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        check_packed(b"\x00" * size, 10)
    assert check_packed(b"\x00" * 320, 10) == 10


# Batches drawn from a small pool so duplicates occur within and across batches.
batches = st.lists(st.lists(st.integers(0, 40), min_size=1, max_size=30), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(batches)
def test_append_packed_equals_append(draws: list[list[int]]) -> None:
    typed, packed = log_at(), log_at()
    for draw in draws:
        buffer = b"".join(digest(i) for i in draw)
        want = typed.append([AppendItem(digest(i)) for i in draw])
        got = packed.append_packed(buffer)
        assert to_results(buffer, got) == want
        assert got.covering_size == max(r.index for r in want) + 1
    assert typed.size == packed.size
    assert typed.root_at(typed.size) == packed.root_at(packed.size)  # the same leaves


@settings(max_examples=200, deadline=None)
@given(batches)
def test_split_equals_one_request_at_a_time(draws: list[list[int]]) -> None:
    """A group of requests committed as one buffer, split, gives each request what it would
    have got alone (with the group's receive time)."""
    grouped, alone = log_at(), log_at()
    buffers = [b"".join(digest(i) for i in draw) for draw in draws]
    parts = split(grouped.append_packed(b"".join(buffers)), [len(d) for d in draws])
    for buffer, part in zip(buffers, parts, strict=True):
        items = [AppendItem(buffer[k : k + 32]) for k in range(0, len(buffer), 32)]
        want = pack_results(alone.append(items), alone.size)
        assert to_results(buffer, part) == to_results(buffer, want)
        assert (part.first_index, part.new_entries) == (want.first_index, want.new_entries)


def test_a_request_of_only_duplicates_points_at_the_log_size() -> None:
    log = log_at()
    log.append_packed(digest(1) + digest(2))
    again = log.append_packed(digest(2) + digest(2))
    assert (again.first_index, again.new_entries, list(again.dup_indexes)) == (2, 0, [1, 1])
    assert again.covering_size == 2
