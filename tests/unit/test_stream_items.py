"""How the server reads one StreamAppend message: digest-only items in their canonical
encoding come out packed (N x 32 bytes, no per-item objects), anything else as typed items;
both stand for the same items, and bad messages are refused the same way."""

from __future__ import annotations

import random

import pytest

from ledger.api import wire
from ledger.api.server import _stream_items
from ledger.core.errors import InvalidArgumentError
from ledger.v1 import ledger_pb2 as pb


def encoded(items: list[pb.AppendItem]) -> bytes:
    return pb.StreamAppendRequest(items=items).SerializeToString()


def test_digest_only_messages_come_out_packed() -> None:
    rng = random.Random(7)
    for n in (1, 2, 3, 100, 10_000):
        digests = [rng.randbytes(32) for _ in range(n)]
        got = _stream_items(encoded([pb.AppendItem(record_digest=d) for d in digests]))
        assert got == b"".join(digests)


def test_other_messages_come_out_typed_with_the_same_items() -> None:
    rng = random.Random(8)
    d = rng.randbytes(32)
    typed = [pb.AppendItem(record_digest=d, metadata=b"x"), pb.AppendItem(record_digest=d)]
    assert _stream_items(encoded(typed)) == list(wire.items_from_pb(typed))
    # one digest, but with an unknown field after it: the full parse (same item)
    odd = encoded([pb.AppendItem(record_digest=d)]) + b"\x10\x01"
    assert _stream_items(odd) == list(wire.items_from_pb([pb.AppendItem(record_digest=d)]))
    assert _stream_items(b"") == []


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (encoded([pb.AppendItem(record_digest=b"short")]), "record_digest"),
        (b"\xff\xff not a message", "malformed"),
        (encoded([pb.AppendItem(record_digest=bytes(32))] * 10_001), "10001"),
    ],
)
def test_bad_messages_are_refused(raw: bytes, words: str) -> None:
    with pytest.raises(InvalidArgumentError, match=words):
        _stream_items(raw)
