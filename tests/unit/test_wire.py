"""The wire boundary (ledger/api/wire.py): every conversion round-trips, every error class has a
status, every status maps back to a class with the right retry rule."""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.api import wire
from ledger.core import errors
from ledger.core.errors import LedgerError, PushbackError, RemoteError, is_retryable
from ledger.core.limits import RETRY_AFTER_KEY
from ledger.core.types import (
    Anchor,
    AnchorOutcome,
    AppendItem,
    AppendOutcome,
    AppendResult,
    ConsistencyProof,
    Entry,
    InclusionProof,
    PublishedCheckpoint,
    ReceiptBundle,
    encode_leaf,
)
from ledger.v1 import ledger_pb2 as pb

hashes = st.binary(min_size=32, max_size=32)
u63 = st.integers(min_value=0, max_value=2**63 - 1)


def error_classes() -> list[type[LedgerError]]:
    found: list[type[LedgerError]] = []
    todo: list[type[LedgerError]] = [LedgerError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_error_class_has_an_explicit_status() -> None:
    """Every class the log can raise (all of ``ledger.*``); the SDK's own ``ClientError``s are
    raised on the agent's side and never cross the wire."""
    import ledger_client.sdk.errors  # noqa: F401  (loaded, so that the walk sees them)

    server_side = [c for c in error_classes() if not c.__module__.startswith("ledger_client.")]
    client_side = [c for c in error_classes() if c.__module__.startswith("ledger_client.")]
    assert client_side and not any(issubclass(c, errors.ServiceError) for c in client_side)
    missing = [c.__name__ for c in server_side if c not in wire.STATUS_OF]
    assert not missing, f"add these to ledger.api.wire.STATUS_OF: {missing}"
    declared = {n for n, v in vars(errors).items() if inspect.isclass(v)}
    assert {c.__name__ for c in error_classes() if c.__module__ == "ledger.core.errors"} == declared


def test_the_inverse_table_round_trips_and_carries_the_retry_rule() -> None:
    for code, cls in wire.ERROR_OF.items():
        exc = wire.error_from_status(code, "detail")
        assert type(exc) is cls and str(exc) == "detail"
        assert wire.status_of(exc) == code
    retryable = {code for code, cls in wire.ERROR_OF.items() if cls.retryable}
    assert retryable == {
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.INTERNAL,
    }


def test_statuses_separate_later_from_never() -> None:
    later = errors.NotYetPublishedError("retry after the next checkpoint")
    never = errors.InvalidArgumentError("index: 15 >= tree_size 10")
    refused = errors.SignatureError("bad signature")
    assert wire.status_of(later) == grpc.StatusCode.OUT_OF_RANGE and is_retryable(later)
    assert wire.status_of(never) == grpc.StatusCode.INVALID_ARGUMENT and not is_retryable(never)
    assert wire.status_of(refused) == grpc.StatusCode.FAILED_PRECONDITION
    assert not is_retryable(refused)
    assert not is_retryable(ValueError("not a ledger error"))


def test_unknown_statuses_become_remote_errors() -> None:
    aborted = wire.error_from_status(grpc.StatusCode.ABORTED, "x")
    assert isinstance(aborted, RemoteError) and aborted.status == "ABORTED"
    assert is_retryable(aborted)
    exists = wire.error_from_status(grpc.StatusCode.ALREADY_EXISTS, "x")
    assert isinstance(exists, RemoteError) and not is_retryable(exists)


def test_pushback_hint_travels_both_ways() -> None:
    trailer = wire.retry_trailer(PushbackError("full", retry_after=0.25))
    assert trailer == ((RETRY_AFTER_KEY, "250"),)
    back = wire.error_from_status(grpc.StatusCode.RESOURCE_EXHAUSTED, "full", trailer)
    assert isinstance(back, PushbackError) and back.retry_after == 0.25
    default = wire.error_from_status(grpc.StatusCode.RESOURCE_EXHAUSTED, "full", [])
    assert isinstance(default, PushbackError) and default.retry_after > 0
    assert wire.retry_trailer(errors.NotFoundError("x")) == ()


def entry(index: int, digest: bytes, ts: int, meta: bytes) -> Entry:
    leaf = encode_leaf(digest, ts, meta)
    return Entry(
        index=index,
        leaf=leaf,
        leaf_hash=hashlib.sha256(b"\x00" + leaf).digest(),
        record_digest=digest,
        timestamp_ms=ts,
        metadata=meta,
    )


entries = st.builds(entry, u63, hashes, u63, st.binary(max_size=64))
proofs = st.builds(
    lambda e, size, hs: InclusionProof(entry=e, tree_size=size, hashes=tuple(hs)),
    entries,
    u63,
    st.lists(hashes, max_size=8),
)
checkpoints = st.builds(
    lambda size, root: PublishedCheckpoint(
        origin="ledger.test/wire", size=size, root_hash=root, note=f"ledger.test/wire\n{size}\n"
    ),
    u63,
    hashes,
)


@given(st.lists(st.tuples(hashes, st.binary(max_size=32)), min_size=1, max_size=8))
def test_items_round_trip(pairs: list[tuple[bytes, bytes]]) -> None:
    digests, metas = [d for d, _ in pairs], [m for _, m in pairs]
    sent = wire.items_to_pb(digests, metas)
    assert wire.items_from_pb(sent) == [AppendItem(d, m) for d, m in pairs]


@given(entries)
def test_entry_round_trip(e: Entry) -> None:
    assert wire.entry_from_pb(pb.Entry.FromString(wire.entry_to_pb(e).SerializeToString())) == e


@given(proofs)
def test_inclusion_round_trip(p: InclusionProof) -> None:
    wired = pb.InclusionProof.FromString(wire.inclusion_to_pb(p).SerializeToString())
    assert wire.inclusion_from_pb(wired) == p


def test_inclusion_with_disagreeing_copies_is_refused() -> None:
    e = entry(3, b"\x01" * 32, 5, b"")
    m = wire.inclusion_to_pb(InclusionProof(entry=e, tree_size=9, hashes=()))
    m.leaf_hash = b"\x02" * 32
    with pytest.raises(errors.InconsistencyError):
        wire.inclusion_from_pb(m)


@given(checkpoints)
def test_checkpoint_round_trip(cp: PublishedCheckpoint) -> None:
    assert wire.checkpoint_from_pb(wire.checkpoint_to_pb(cp)) == cp


@given(u63, u63, st.lists(hashes, max_size=8))
def test_consistency_round_trip(size1: int, size2: int, hs: list[bytes]) -> None:
    proof = ConsistencyProof(size1=size1, size2=size2, hashes=tuple(hs))
    assert wire.consistency_from_pb(wire.consistency_to_pb(proof)) == proof


@given(
    st.lists(st.builds(AppendResult, u63, hashes, u63, st.booleans()), min_size=1, max_size=8),
    st.none() | checkpoints,
    st.booleans(),
)
def test_append_outcome_round_trip(
    results: list[AppendResult], cp: PublishedCheckpoint | None, with_proofs: bool
) -> None:
    proofs = [(bytes([i]) * 32,) * i for i in range(len(results))] if with_proofs else None
    outcome = AppendOutcome(results=results, checkpoint=cp, proofs=proofs)
    back = wire.append_outcome_from_pb(wire.append_outcome_to_pb(outcome), with_proofs=with_proofs)
    assert back == outcome


@given(u63, st.lists(st.builds(AppendResult, u63, hashes, u63, st.booleans()), max_size=8))
def test_stream_ack_round_trip(position: int, results: list[AppendResult]) -> None:
    position = min(position, 2**62)
    ack = wire.stream_ack_from_pb(wire.stream_ack_to_pb(position, results))
    assert ack.first_position == position and ack.count == len(results)
    new = [r for r in results if not r.duplicate]
    assert ack.new_entries == len(new)
    assert ack.first_index == (new[0].index if new else 0)
    assert ack.duplicates == {position + i: r.index for i, r in enumerate(results) if r.duplicate}


@pytest.fixture(scope="module")
def token() -> bytes:
    from ledger.timestamp.rfc3161 import build_request, token_from_response
    from ledger.tsa.authority import TsaAuthority

    tsa = TsaAuthority.generate("Wire TSA")
    request = build_request(hashlib.sha256(b"checkpoint body").digest())
    return token_from_response(tsa.respond(request.der))


def test_anchor_receipts_and_outcome_round_trip(token: bytes) -> None:
    anchor = Anchor(size=9, tsa="embedded", token=token, gen_time_ms=1_700_000_000_000)
    wired = wire.anchor_to_pb(anchor)
    assert wired.message_imprint == hashlib.sha256(b"checkpoint body").digest()
    assert wired.certificates  # the signer's certificate, extracted from the token
    assert wire.anchor_from_pb(wired) == anchor
    cp = PublishedCheckpoint(origin="o", size=9, root_hash=b"\x05" * 32, note="o\n9\n")
    e = entry(2, b"\x03" * 32, 7, b"m")
    bundle = ReceiptBundle(
        checkpoint=cp,
        anchors=(anchor,),
        proofs=(InclusionProof(entry=e, tree_size=9, hashes=(b"\x04" * 32,)),),
    )
    raw = wire.receipts_to_pb(bundle).SerializeToString()
    assert wire.receipts_from_pb(pb.GetReceiptsResponse.FromString(raw)) == bundle
    outcome = AnchorOutcome(size=9, anchors=[anchor], failures=["slow: timed out"])
    assert wire.anchor_outcome_from_pb(wire.anchor_outcome_to_pb(outcome)) == outcome


def test_mypy_catches_a_misspelt_field_in_a_handler(tmp_path: Path) -> None:
    """Handlers are typed with the generated messages: a misspelt field fails mypy --strict."""
    api = pytest.importorskip("mypy.api")
    root = Path(__file__).resolve().parents[2]
    source = (root / "ledger" / "api" / "server.py").read_text()
    assert "request.size)" in source
    bad = tmp_path / "bad_server.py"
    bad.write_text(source.replace("request.size)", "request.sizee)", 1))
    out, _, status = api.run(["--strict", "--follow-imports=silent", "--no-incremental", str(bad)])
    assert status == 1 and 'has no attribute "sizee"' in out, out
