"""AppendPacked over real gRPC servers on port 0 and real RocksDB: the same leaves and results as
AppendRecords, the same limits, budget and scope, and clear statuses for bad buffers."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest

from ledger.api import wire
from ledger.api.auth import TokenStore
from ledger.api.server import ServerLimits, create_server
from ledger.core.checkpoint import Ed25519Signer
from ledger.core.errors import PermissionDeniedError, PushbackError, UnauthenticatedError
from ledger.core.packed import to_results
from ledger.core.types import AppendResult
from ledger.log.facade import Log
from ledger.log.service import LogService
from ledger.store.rocks import RocksStore
from ledger.v1 import ledger_pb2 as pb
from ledger.v1 import ledger_pb2_grpc as pb_grpc
from ledger_client.remote.connection import Connection
from ledger_client.remote.log import RemoteLog
from tests.harness import running_server

pytestmark = pytest.mark.integration

ORIGIN = "ledger.test/packed"
Stub = pb_grpc.LedgerServiceStub


def digest(i: int, salt: str = "") -> bytes:
    return hashlib.sha256(f"packed-{salt}-{i}".encode()).digest()


@asynccontextmanager
async def served(path: Path, clock: Callable[[], int]) -> AsyncIterator[tuple[Stub, LogService]]:
    """A log on RocksDB with an injected clock behind a real gRPC server."""
    store = RocksStore(path)
    log = Log(store=store, signer=Ed25519Signer.generate(ORIGIN), origin=ORIGIN, clock_ms=clock)
    service = LogService(log, checkpoint_interval=0.01)
    await service.start()
    server, port = await create_server(service, "127.0.0.1:0", limits=ServerLimits())
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield pb_grpc.LedgerServiceStub(channel), service  # type: ignore[no-untyped-call]
    finally:
        await server.stop(1)
        await service.stop()
        store.close()


def typed(response: pb.AppendRecordsResponse) -> list[AppendResult]:
    return wire.append_outcome_from_pb(response, with_proofs=False).results


def test_packed_yields_the_leaves_and_results_of_append_records(tmp_path: Path) -> None:
    """Random batches with duplicates inside a request, across requests and across concurrent
    requests of one group commit: byte-identical leaves and identical results."""
    rng = random.Random(23)
    pool = [digest(i, "eq") for i in range(400)]
    rounds = []
    for _ in range(12):  # each round: up to 4 requests sent at once (one or more group commits)
        rounds.append([rng.choices(pool, k=rng.randint(1, 120)) for _ in range(rng.randint(1, 4))])

    async def main() -> None:
        now = [1_700_000_000_000]
        clock = lambda: now[0]  # noqa: E731
        async with (
            served(tmp_path / "typed", clock) as (typed_stub, typed_service),
            served(tmp_path / "packed", clock) as (packed_stub, packed_service),
        ):
            for batches in rounds:
                # the same requests in the same order: serialise each round's requests, one
                # per group commit on both sides, so both logs sequence the same groups
                for batch in batches:
                    want = typed(
                        await typed_stub.AppendRecords(
                            pb.AppendRecordsRequest(items=wire.items_to_pb(batch))
                        )
                    )
                    joined = b"".join(batch)
                    answer = await packed_stub.AppendPacked(
                        pb.AppendPackedRequest(record_digests=joined)
                    )
                    got = to_results(joined, wire.packed_from_pb(answer, len(batch)))
                    assert got == want
                    new = [r.index for r in got if not r.duplicate]
                    assert new == list(range(answer.first_index, answer.first_index + len(new)))
                now[0] += rng.randint(0, 3)
            # concurrent requests share group commits: each request's new indexes stay
            # consecutive, and its results agree with what the log holds
            extra = [[digest(i, f"c{k}") for i in range(50)] + pool[:5] for k in range(6)]
            answers = await asyncio.gather(
                *(
                    packed_stub.AppendPacked(pb.AppendPackedRequest(record_digests=b"".join(b)))
                    for b in extra
                )
            )
            for batch, answer in zip(extra, answers, strict=True):
                results = to_results(b"".join(batch), wire.packed_from_pb(answer, len(batch)))
                assert [r.duplicate for r in results] == [False] * 50 + [True] * 5
                for r, d in zip(results, batch, strict=True):
                    entry = packed_service.log.entry_by_digest(d)
                    assert (entry.index, entry.leaf_hash) == (r.index, r.leaf_hash)
            size = typed_service.log.size
            assert packed_service.log.size == size + 6 * 50
            assert typed_service.log.entries(0, size) == packed_service.log.entries(0, size)
            assert typed_service.log.root_at(size) == packed_service.log.root_at(size)

    asyncio.run(main())


def test_packed_answers_duplicates_of_entries_with_metadata(tmp_path: Path) -> None:
    with running_server(tmp_path) as (_, log, _signer):
        first = log.append([digest(1, "m")], metadata=[b"meta"]).results[0]
        packed = log.append_packed([digest(2, "m"), digest(1, "m")])
        results = to_results(digest(2, "m") + digest(1, "m"), packed)
        assert results[1] == first._replace(duplicate=True)  # the original leaf's hash
        assert log.entry(digest(2, "m")).leaf_hash == results[0].leaf_hash
        assert packed.covering_size == 2


def test_fuzzed_packed_buffers_get_clear_statuses(tmp_path: Path) -> None:
    """The fuzz cases: ragged lengths, empty, over the batch limit, over the message limit,
    and bytes that are not the request message; nothing partial is written."""
    inv = grpc.StatusCode.INVALID_ARGUMENT
    rng = random.Random(5)
    with running_server(tmp_path) as (server, log, _signer):
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.LedgerServiceStub(channel)  # type: ignore[no-untyped-call]

            def refused(data: bytes) -> grpc.RpcError:
                with pytest.raises(grpc.RpcError) as info:
                    stub.AppendPacked(pb.AppendPackedRequest(record_digests=data), timeout=10)
                return info.value

            for n in [1, 31, 33, 63, 65, *rng.sample(range(1, 320_000), 20)]:
                if n % 32 == 0:
                    continue
                err = refused(rng.randbytes(n))
                assert err.code() == inv
                assert f"{n} bytes, not a multiple of 32" in (err.details() or "")
            err = refused(b"")
            assert err.code() == inv and "empty" in (err.details() or "")
            err = refused(b"\x01" * 32 * 10_001)
            assert err.code() == inv and "10001 digests in one request, max 10000" in (
                err.details() or ""
            )
            err = refused(b"\x01" * (3 << 20))  # past the server's request size limit
            assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            raw = channel.unary_unary("/ledger.v1.LedgerService/AppendPacked", None, None)
            for junk in [b"\x0a\xff\xff\xff", b"\xff", rng.randbytes(64)]:
                with pytest.raises(grpc.RpcError) as info:
                    raw(junk, timeout=10)
                assert info.value.code() == inv
        assert log.append_packed([digest(1, "after")]).first_index == 0  # nothing partial
        # the typed call is unchanged
        assert log.append([digest(1, "after")]).results[0].duplicate


def test_packed_needs_the_append_scope(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    store = TokenStore(data / "tokens.json")
    made = {s: store.create(f"t-{s}", [s], now=1)[0] for s in ("append", "admin", "read")}
    with running_server(data) as (server, anonymous, _):
        with pytest.raises(UnauthenticatedError, match="needs a credential"):
            anonymous.append_packed([digest(0, "s")])
        with (
            RemoteLog(Connection(address=server.address, token=made["read"])) as reader,
            pytest.raises(PermissionDeniedError, match="'append' scope for AppendPacked"),
        ):
            reader.append_packed([digest(0, "s")])
        for scope in ("append", "admin"):
            with RemoteLog(Connection(address=server.address, token=made[scope])) as writer:
                assert writer.append_packed([digest(1, scope)]).new_entries == 1


def test_packed_goes_through_pushback(tmp_path: Path) -> None:
    """The same queue bound as AppendRecords: a burst far above max_pending is refused with
    RESOURCE_EXHAUSTED and a retry hint, and the log keeps working."""
    import threading

    hints: list[float] = []
    with running_server(tmp_path, max_pending=2_000) as (server, log, _signer):

        def burst(worker: int) -> None:
            with RemoteLog(server.address) as client:
                for n in range(8):
                    try:
                        client.append_packed([digest(i, f"p{worker}-{n}") for i in range(1_000)])
                    except PushbackError as exc:
                        hints.append(exc.retry_after)

        threads = [threading.Thread(target=burst, args=(w,)) for w in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert hints and all(h > 0 for h in hints)
        assert log.append_packed([digest(0, "calm")]).new_entries == 1


def test_items_and_packed_interleave_in_one_log(tmp_path: Path) -> None:
    with running_server(tmp_path) as (_, log, _signer):
        a = log.append([digest(i, "i") for i in range(3)]).results
        b = log.append_packed([digest(i, "i") for i in range(2, 6)])
        assert [r.index for r in a] == [0, 1, 2]
        assert (b.first_index, b.new_entries, list(b.dup_positions)) == (3, 3, [0])
        assert list(b.dup_indexes) == [2]


def test_cli_append_and_the_sdk_sender_use_the_packed_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`ledger append` and the SDK's background sender send digests only: AppendPacked, never
    AppendRecords (the server's access log names each call)."""
    from click.testing import CliRunner

    from ledger.cli.main import main
    from ledger.records.decision import DecisionRecord, MemoryWrite, new_record_id
    from ledger_client.sdk.client import LedgerClient
    from tests.harness import QUICK

    caplog.set_level(logging.INFO, logger="ledger.access")
    with running_server(tmp_path / "data") as (server, log, _signer):
        out = CliRunner().invoke(
            main,
            ["append", "--server", server.address, "--digest", digest(1, "cli").hex(),
             "--proof-out", str(tmp_path / "proof.txt")],
        )  # fmt: skip
        assert out.exit_code == 0, out.output
        assert json.loads(out.stdout)["index"] == 0 and (tmp_path / "proof.txt").exists()
        client = LedgerClient(server.address, spool=tmp_path / "a.spool", options=QUICK)
        records = [
            DecisionRecord(
                record_id=new_record_id(), run_id="packed", step=n,
                time="2026-01-01T00:00:00.000Z", agent="agent-p",
                payload=MemoryWrite(key="k", value=f"v{n}", source="user", trust_label="trusted"),
            )
            for n in range(5)
        ]  # fmt: skip
        digests = [client.submit(r) for r in records]
        assert client.close(10)
        assert sorted(log.entry(d).index for d in digests) == [1, 2, 3, 4, 5]
    calls = [r.getMessage() for r in caplog.records if r.name == "ledger.access"]
    appends = [c for c in calls if "Append" in c]
    assert appends and all("AppendPacked OK" in c for c in appends), appends


def test_packed_goes_through_the_byte_budget(tmp_path: Path) -> None:
    """The one in-flight byte budget counts AppendPacked requests too (before parsing them)."""
    with running_server(tmp_path / "data", inflight_mb=1, max_request_mb=4) as (server, _, _):
        big = pb.AppendPackedRequest(record_digests=bytes(32 * 48_000)).SerializeToString()
        options = [("grpc.max_send_message_length", 64 << 20)]
        with grpc.insecure_channel(server.address, options=options) as channel:
            append = channel.unary_unary("/ledger.v1.LedgerService/AppendPacked", None, None)
            with pytest.raises(grpc.RpcError) as over_budget:
                append(big, timeout=20)  # ~1.5 MB: within the core limit, beyond the budget
            assert over_budget.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "in-flight budget" in (over_budget.value.details() or "")
            trailers = over_budget.value.trailing_metadata() or ()
            assert "retry-after-ms" in [m.key for m in trailers]
            # Every read first reserves max_request_mb (4 MiB) in the 1 MiB budget: a small
            # packed append is refused the same way, before a byte of it is read.
            with pytest.raises(grpc.RpcError) as small:
                append(pb.AppendPackedRequest(record_digests=bytes(32)).SerializeToString())
            assert small.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_stream_of_digests_and_typed_items_acks_as_append_records(tmp_path: Path) -> None:
    """StreamAppend keeps digest-only messages packed (one digest per message: no per-item
    objects) and others typed: over a stream mixing both, with duplicates within and across
    messages and a duplicate last in a group, every ack group gets the results AppendRecords
    gives for the same items on a second log with the same clock, and both logs hold the same
    leaves."""
    rng = random.Random(31)
    pool = [digest(i, "st") for i in range(60)]
    messages: list[list[pb.AppendItem]] = []
    for _ in range(150):
        digests = rng.choices(pool, k=rng.choice([1, 1, 1, 2, 7]))
        with_meta = rng.random() < 0.2
        messages.append(
            [pb.AppendItem(record_digest=d, metadata=b"m" if with_meta else b"") for d in digests]
        )
    messages.append([pb.AppendItem(record_digest=pool[0])])  # a duplicate last

    async def main() -> None:
        clock = lambda: 1_700_000_000_000  # noqa: E731
        async with (
            served(tmp_path / "stream", clock) as (stream_stub, stream_service),
            served(tmp_path / "typed", clock) as (typed_stub, typed_service),
        ):

            async def requests() -> AsyncIterator[pb.StreamAppendRequest]:
                for items in messages:
                    yield pb.StreamAppendRequest(items=items)

            flat = [item for items in messages for item in items]
            position = 0
            async for ack in stream_stub.StreamAppend(requests()):
                assert ack.first_position == position
                group = flat[position : position + ack.count]
                want = typed(await typed_stub.AppendRecords(pb.AppendRecordsRequest(items=group)))
                dups = {d.position - position: d.index for d in ack.duplicates}
                assert [k for k, r in enumerate(want) if r.duplicate] == sorted(dups)
                assert [r.index for r in want if r.duplicate] == [dups[k] for k in sorted(dups)]
                new = [r.index for r in want if not r.duplicate]
                assert ack.new_entries == len(new)
                assert new == list(range(ack.first_index, ack.first_index + len(new)))
                assert ack.timestamp_ms == want[-1].timestamp_ms
                position += ack.count
            assert position == len(flat)
            size = typed_service.log.size
            assert stream_service.log.size == size
            assert typed_service.log.entries(0, size) == stream_service.log.entries(0, size)
            assert typed_service.log.root_at(size) == stream_service.log.root_at(size)

    asyncio.run(main())
