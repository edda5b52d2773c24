"""The log service against a real gRPC server on port 0 and a real RocksDB in a temp dir."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import grpc
import pytest

from ledger.core import merkle
from ledger.core.checkpoint import Ed25519Signer, open_checkpoint
from ledger.core.errors import LedgerError, PushbackError, is_retryable
from ledger.core.types import decode_leaf
from ledger_client.remote.log import RemoteLog, status_name
from tests.harness import ORIGIN, running_server

pytestmark = pytest.mark.integration


def digest(i: int, salt: str = "") -> bytes:
    return hashlib.sha256(f"record-{salt}-{i}".encode()).digest()


def check_checkpoint(note: str, signer: Ed25519Signer) -> tuple[int, bytes]:
    cp = open_checkpoint(note, [signer.verifier()], origin=ORIGIN).checkpoint
    return cp.size, cp.root_hash


def test_append_wait_and_verify_proofs(tmp_path: Path) -> None:
    with running_server(tmp_path) as (_, log, signer):
        out = log.append(
            [digest(i) for i in range(10)], wait_for_checkpoint=True, include_proofs=True
        )
        assert out.proofs is not None
        assert [r.index for r in out.results] == list(range(10))
        assert not any(r.duplicate for r in out.results)
        assert out.checkpoint is not None
        size, root = check_checkpoint(out.checkpoint.note, signer)
        assert size >= 10
        for r, proof in zip(out.results, out.proofs, strict=True):
            merkle.verify_inclusion(r.leaf_hash, r.index, size, proof, root)
        # the leaf binds the digest and the log's time
        entry = log.entry(digest(3))
        assert entry.index == 3 and entry.record_digest == digest(3)
        assert merkle.leaf_hash(entry.leaf) == out.results[3].leaf_hash
        assert decode_leaf(3, entry.leaf).timestamp_ms == out.results[3].timestamp_ms


def test_duplicates_return_the_original(tmp_path: Path) -> None:
    with running_server(tmp_path) as (_, log, _signer):
        first = log.append([digest(1), digest(2)]).results
        again = log.append([digest(3), digest(1), digest(3)]).results
        assert again[1].duplicate and again[1].index == first[0].index
        assert again[1].leaf_hash == first[0].leaf_hash
        assert not again[0].duplicate and again[2].duplicate and again[2].index == again[0].index
        assert again[0].index == 2


def test_stream_append_acks_durable_batches(tmp_path: Path) -> None:
    with running_server(tmp_path) as (_, log, _signer):
        log.append([digest(0, "s")])
        batches = [[digest(i, "s") for i in range(b * 50, b * 50 + 50)] for b in range(20)]
        acks = list(log.stream_append(batches))
        assert sum(a.count for a in acks) == 1000
        assert len(acks) <= 20  # batched acks, never one per item
        assert acks[0].duplicates == {0: 0}
        positions = [a.first_position for a in acks]
        assert positions == sorted(positions) and positions[0] == 0
        assert sum(a.new_entries for a in acks) == 999


def test_historical_proofs_and_all_consistency_pairs(tmp_path: Path) -> None:
    with running_server(tmp_path) as (_, log, signer):
        checkpoints = []
        for batch in range(6):
            out = log.append([digest(i, f"h{batch}") for i in range(batch * 7 + 1)],
                             wait_for_checkpoint=True)  # fmt: skip
            assert out.checkpoint is not None
            checkpoints.append(check_checkpoint(out.checkpoint.note, signer))
        checkpoints = sorted(set(checkpoints))
        for (s1, r1), (s2, r2) in itertools.combinations_with_replacement(checkpoints, 2):
            proof = log.consistency_proof(s1, s2)
            merkle.verify_consistency(s1, s2, r1, r2, list(proof.hashes))
        for size, root in checkpoints:
            for p in log.inclusion_proofs(indexes=list(range(size)), tree_size=size):
                merkle.verify_inclusion(p.leaf_hash, p.entry.index, size, list(p.hashes), root)
            assert log.checkpoint(size).root_hash == root
        p = log.inclusion_proof(record_digest=digest(0, "h2"), tree_size=checkpoints[-1][0])
        assert p.entry.record_digest == digest(0, "h2")


def test_restart_keeps_everything(tmp_path: Path) -> None:
    signer = Ed25519Signer.generate(ORIGIN)
    with running_server(tmp_path, signer) as (_, log, _):
        out = log.append([digest(i, "r") for i in range(100)], wait_for_checkpoint=True)
        assert out.checkpoint is not None
        before = out.checkpoint
    with running_server(tmp_path, signer) as (_, log, _):
        after = log.checkpoint()
        assert after.size == before.size and after.root_hash == before.root_hash
        again = log.append([digest(5, "r")]).results[0]
        assert again.duplicate and again.index == 5
        new = log.append([digest(0, "new")], wait_for_checkpoint=True)
        assert new.results[0].index == 100
        assert new.checkpoint is not None
        proof = log.consistency_proof(before.size, new.checkpoint.size)
        merkle.verify_consistency(before.size, new.checkpoint.size, before.root_hash,
                                  new.checkpoint.root_hash, list(proof.hashes))  # fmt: skip


def expect(code: grpc.StatusCode, words: str, call: object) -> LedgerError:
    """The call fails with ``code`` (as translated by the remote client) naming ``words``."""
    with pytest.raises(LedgerError) as info:
        call()  # type: ignore[operator]
    err = info.value
    assert status_name(err) == code.name, str(err)
    assert words in str(err), str(err)
    return err


def test_bad_input_gets_clear_statuses(tmp_path: Path) -> None:
    inv, oor = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE
    with running_server(tmp_path) as (_, log, _signer):
        log.append([digest(i, "b") for i in range(5)], wait_for_checkpoint=True)
        size = log.checkpoint().size
        expect(inv, "items[0].record_digest: 31 bytes", lambda: log.append([b"x" * 31]))
        expect(inv, "items: empty batch", lambda: log.append([]))
        expect(
            inv, "items: 10001 in one batch", lambda: log.append([digest(i) for i in range(10_001)])
        )
        expect(inv, "metadata: 2000 bytes, max 1024",
               lambda: log.append([digest(9, "m")], metadata=[b"m" * 2000]))  # fmt: skip
        beyond = expect(oor, f"index: {size} >= latest published tree size {size}",
                        lambda: log.inclusion_proof(index=size))  # fmt: skip
        assert is_retryable(beyond)  # it may exist later
        never = expect(inv, "index: 15 >= tree_size 3",
                       lambda: log.inclusion_proof(index=15, tree_size=3))  # fmt: skip
        assert not is_retryable(never)  # it can never be in the tree of size 3
        expect(oor, "tree_size", lambda: log.inclusion_proof(index=0, tree_size=size + 1))
        expect(inv, "size1: 4 > size2 3", lambda: log.consistency_proof(4, 3))
        expect(oor, "size2", lambda: log.consistency_proof(1, size + 5))
        expect(
            oor, f"size1: {size + 3} > latest published", lambda: log.consistency_proof(size + 3)
        )
        expect(grpc.StatusCode.NOT_FOUND, "not in the log", lambda: log.entry(digest(404)))
        expect(inv, "record_digest: 3 bytes", lambda: log.entry(b"abc"))
        expect(inv, "leaf: set index or record_digest", lambda: log.inclusion_proof())
        expect(grpc.StatusCode.NOT_FOUND, "no checkpoint was published for size 2",
               lambda: log.checkpoint(2))  # fmt: skip
        expect(oor, "start", lambda: log.entries(size, 10))
        expect(inv, "count", lambda: log.entries(0, 0))
        expect(inv, "want 1..1000", lambda: log.inclusion_proofs(indexes=[0] * 1001))
        assert len(log.entries(0, 5_000)) == size  # pages are bounded and cut at the size
        # the log still works and nothing partial was written
        assert log.append([digest(6, "b")], wait_for_checkpoint=True).results[0].index == size


def test_sequenced_but_unpublished_is_out_of_range_and_retryable(tmp_path: Path) -> None:
    with running_server(tmp_path, checkpoint_interval_ms=60_000) as (server, log, _signer):
        log.append([digest(0, "u")], wait_for_checkpoint=True)  # publishes at once
        index = log.append([digest(1, "u")]).results[0].index  # next publish is a minute away
        err = expect(grpc.StatusCode.OUT_OF_RANGE, "retry after the next checkpoint",
                     lambda: log.inclusion_proof(index=index))  # fmt: skip
        assert is_retryable(err)
        err = expect(grpc.StatusCode.OUT_OF_RANGE, "retry after the next checkpoint",
                     lambda: log.receipts([digest(1, "u")], prefer_anchored=False))  # fmt: skip
        assert is_retryable(err)
        assert server.app.service.log.size == 2


def test_health_and_reflection(tmp_path: Path) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    with (
        running_server(tmp_path) as (server, _log, _signer),
        grpc.insecure_channel(server.address) as channel,
    ):
        health = health_pb2_grpc.HealthStub(channel)
        status = health.Check(health_pb2.HealthCheckRequest(service="ledger.v1.LedgerService"))
        assert status.status == health_pb2.HealthCheckResponse.SERVING
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        reply = next(iter(stub.ServerReflectionInfo(iter([request]))))
        names = {s.name for s in reply.list_services_response.service}
        assert "ledger.v1.LedgerService" in names


def test_remote_log_is_typed(tmp_path: Path) -> None:
    with running_server(tmp_path) as (server, _log, _signer), RemoteLog(server.address) as other:
        assert other.checkpoint().origin == ORIGIN


def test_malformed_protobuf_is_invalid_argument(tmp_path: Path) -> None:
    with running_server(tmp_path) as (server, log, _signer):
        with grpc.insecure_channel(server.address) as channel:
            raw = channel.unary_unary("/ledger.v1.LedgerService/AppendRecords", None, None)
            with pytest.raises(grpc.RpcError) as info:
                raw(b"\x0a\xff\xff\xff", timeout=10)  # a length that runs past the end
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "malformed AppendRecordsRequest" in (info.value.details() or "")
            stream = channel.stream_stream("/ledger.v1.LedgerService/StreamAppend", None, None)
            with pytest.raises(grpc.RpcError) as info:
                list(stream(iter([b"\x0a\xff\xff"]), timeout=10))
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert log.append([digest(1, "after")]).results[0].index == 0  # nothing partial


def test_pushback_when_queues_are_full(tmp_path: Path) -> None:
    import threading

    codes: list[str] = []
    hints: list[float] = []
    with running_server(tmp_path, max_pending=2_000) as (server, log, _signer):

        def burst(worker: int) -> None:
            with RemoteLog(server.address) as client:
                for n in range(8):
                    try:
                        client.append([digest(i, f"p{worker}-{n}") for i in range(1_000)])
                    except PushbackError as exc:
                        codes.append(status_name(exc))
                        hints.append(exc.retry_after)

        threads = [threading.Thread(target=burst, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert codes, "no pushback under a burst far above max_pending"
        assert set(codes) == {"RESOURCE_EXHAUSTED"}
        assert len(hints) == len(codes)
        assert all(h > 0 for h in hints)  # the server's retry-after-ms hint, carried over
        # the server is healthy afterwards
        assert log.append([digest(0, "calm")], wait_for_checkpoint=True).checkpoint is not None


def test_fast_stream_of_big_messages_is_split_into_valid_groups(tmp_path: Path) -> None:
    """A stream that outruns the writer piles up more than one request's worth of items."""
    with running_server(tmp_path) as (_, log, _signer):
        batches = [[digest(i, f"big{b}") for i in range(500)] for b in range(60)]
        acks = list(log.stream_append(batches))
        assert sum(a.count for a in acks) == 30_000
        assert sum(a.new_entries for a in acks) == 30_000
        assert all(a.count <= 10_000 for a in acks)
